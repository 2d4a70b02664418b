// Draining: the daemon stops admitting work, lets the ops already submitted finish (each
// bounded by its deadline, all by the drain's timeout), fails what is left at the timeout,
// and then stops. Upgrades and maintenance use it instead of a plain stop, which fails
// every op in flight at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cclo/v1/admin.pb.h"
#include "daemon/communicators.h"
#include "daemon/root_gather.h"
#include "daemon/sessions.h"
#include "hw/clock.h"

namespace cclo::daemon {

class Drain {
 public:
  /// `stop` ends the daemon once a drain finished (it runs on the draining thread and must
  /// not wait for the daemon to go).
  Drain(SessionRegistry* sessions, Communicators* communicators, RootGather* root_gather,
        std::function<void()> stop);

  /// OK while the daemon admits work; once a drain began, UNAVAILABLE "cclod is draining:
  /// <what> refused".
  absl::Status Admit(absl::string_view what) const;

  /// Whether a drain began.
  bool draining() const { return draining_.load(); }

  /// A Submit's hold from its last check until its op is registered: a drain that begins
  /// meanwhile waits for it before it looks for ops, so that none is registered behind
  /// its back. Move-only; released when destroyed.
  class Admission {
   public:
    Admission(Admission&& other) noexcept : admitting_(std::exchange(other.admitting_, nullptr)) {}
    Admission& operator=(Admission&&) = delete;
    ~Admission() {
      if (admitting_ != nullptr) admitting_->fetch_sub(1);
    }

   private:
    friend class Drain;
    explicit Admission(std::atomic<uint64_t>* admitting) : admitting_(admitting) {}
    std::atomic<uint64_t>* admitting_;
  };
  /// An Admission while the daemon admits work, else Admit's refusal.
  absl::StatusOr<Admission> Enter(absl::string_view what) const;

  /// Stops admitting (joins waiting at this root fail, since it refuses every join from
  /// now on), waits for the Admissions given before, then until no session holds an op (each
  /// finished and its result collected) or `timeout` passed, then breaks the communicators of the
  /// ops left (which fails them with the reason) and gives their clients a short while to collect
  /// that; then calls `stop`. FAILED_PRECONDITION if a drain already began.
  absl::StatusOr<cclo::v1::DrainResponse> Run(absl::Duration timeout);

 private:
  /// Ops of all sessions, summed.
  Session::OpCounts CountOps() const;
  /// Waits for every session to hold no op, until `deadline`; returns whether they did.
  bool AwaitNoOps(hw::SteadyTime deadline) const;

  SessionRegistry* const sessions_;
  Communicators* const communicators_;
  RootGather* const root_gather_;
  const std::function<void()> stop_;
  std::atomic<bool> draining_{false};
  /// Admissions not yet released. With draining_, seq_cst: a Submit that counted itself
  /// before the drain began is waited for, one after it sees the drain.
  mutable std::atomic<uint64_t> admitting_{0};
};

}  // namespace cclo::daemon
