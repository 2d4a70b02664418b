#include "daemon/drain.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

/// After the timeout, how long clients get to collect the failures of the ops cut off.
constexpr absl::Duration kCutOffGrace = absl::Seconds(2);

}  // namespace

Drain::Drain(SessionRegistry* sessions, Communicators* communicators, RootGather* root_gather,
             std::function<void()> stop)
    : sessions_(sessions),
      communicators_(communicators),
      root_gather_(root_gather),
      stop_(std::move(stop)) {}

absl::Status Drain::Admit(absl::string_view what) const {
  if (!draining()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("cclod is draining: ", what, " refused"));
}

absl::StatusOr<Drain::Admission> Drain::Enter(absl::string_view what) const {
  admitting_.fetch_add(1);
  Admission admission(&admitting_);
  if (absl::Status admitted = Admit(what); !admitted.ok()) return admitted;
  return admission;
}

Session::OpCounts Drain::CountOps() const {
  Session::OpCounts sum;
  for (const SessionPtr& session : sessions_->All()) {
    const Session::OpCounts counts = session->CountOps();
    sum.queued += counts.queued;
    sum.running += counts.running;
    sum.done += counts.done;
  }
  return sum;
}

bool Drain::AwaitNoOps(hw::SteadyTime deadline) const {
  // No session or op can be added while draining, so one pass over the sessions suffices.
  bool idle = true;
  for (const SessionPtr& session : sessions_->All()) idle = session->AwaitNoOps(deadline) && idle;
  return idle;
}

absl::StatusOr<cclo::v1::DrainResponse> Drain::Run(absl::Duration timeout) {
  if (draining_.exchange(true)) {
    return absl::FailedPreconditionError("cclod is already draining");
  }
  root_gather_->Refuse(Admit("joins"));
  // A Submit admitted before the drain began registers its op first (a few microseconds).
  while (admitting_.load() > 0) absl::SleepFor(absl::Microseconds(50));
  const hw::SteadyTime started = hw::SteadyNow();
  const uint64_t completed_before = communicators_->OpsCompleted();
  const Session::OpCounts at_start = CountOps();
  cclo::v1::DrainResponse response;
  response.set_ops_in_flight(at_start.queued + at_start.running);
  spdlog::warn("draining: new work is refused; waiting up to {} for {} ops in flight",
               absl::FormatDuration(timeout), response.ops_in_flight());

  response.set_timed_out(!AwaitNoOps(started + timeout));
  const Session::OpCounts left = CountOps();
  response.set_ops_cut_off(left.queued + left.running);
  // Every op in flight at the start finished OK, failed or is cut off. The failures are
  // what is left: an op whose client exited is gone from its session before the engine
  // reports its end.
  response.set_ops_completed(communicators_->OpsCompleted() - completed_before);
  const uint64_t ended = response.ops_completed() + response.ops_cut_off();
  response.set_ops_failed(response.ops_in_flight() > ended ? response.ops_in_flight() - ended : 0);
  if (response.ops_cut_off() > 0) {
    communicators_->BreakBusy(absl::StrCat("cclod is draining and its drain timeout (",
                                           absl::FormatDuration(timeout), ") passed"));
    AwaitNoOps(hw::SteadyNow() + kCutOffGrace);
  }
  response.set_results_uncollected(CountOps().done);
  response.set_elapsed_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(hw::Since(started))));
  spdlog::warn(
      "drain finished in {} ms: {} ops in flight at the start, {} completed, {} failed, {} cut "
      "off at the timeout, {} results not collected; stopping",
      response.elapsed_ms(), response.ops_in_flight(), response.ops_completed(),
      response.ops_failed(), response.ops_cut_off(), response.results_uncollected());
  stop_();
  return response;
}

}  // namespace cclo::daemon
