// An op submitted to cclod and not yet waited for.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hw/clock.h"

namespace cclo {
namespace client {
class Session;
}

/// Handle of one submitted op (returned by the Communicator's *Async methods).
///
/// Move-only. A moved-from request holds no op: op_id() is 0 (no op's id), done() is false,
/// and Wait, Test and Cancel fail with FAILED_PRECONDITION ("this Request was moved from");
/// another request may be moved into it.
///
/// Wait, Test, Cancel, op_id() and done() may be called from several threads at
/// once (progress threads waiting on one request): every waiter learns the op's result.
/// The other accessors are read once done() is true (they do not change after that).
/// Moving, assigning or destroying a request while another thread uses it is not allowed.
/// Once the op has finished, its result is kept and every further Wait/Test returns it
/// without asking the daemon.
class Request {
 public:
  /// How long past an op's deadline Wait() still waits for the daemon's report (or, if
  /// later, past the last time this process found results in the session's completion
  /// ring, while the daemon holds results that found that ring full).
  static constexpr absl::Duration kReportGrace = absl::Seconds(10);

  Request(Request&& other) noexcept { *this = std::move(other); }
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  /// A request dropped before its op finished: the op goes on; its result is discarded.
  ~Request();

  /// Waits until the op finishes; returns its result (OK or the daemon's error). The daemon
  /// enforces each op's deadline, so this ends by kReportGrace after the op's timeout
  /// expires (DEADLINE_EXCEEDED if the daemon has not reported it), or later while the
  /// daemon delivers results that found the session's completion ring full.
  absl::Status Wait();

  /// Waits at most `timeout`. DEADLINE_EXCEEDED when the op is still running; the request
  /// stays valid and can be waited for again. Otherwise the op's result.
  absl::Status Wait(absl::Duration timeout);

  /// Checks without blocking: false while the op runs, true when it finished OK, and the
  /// op's error when it finished with one. UNAVAILABLE once the daemon is gone (looked at
  /// every 100 ms at most), DEADLINE_EXCEEDED once the daemon is past reporting the op.
  absl::StatusOr<bool> Test();

  /// Withdraws the op if it has not been handed to the engine yet, i.e. while it waits for
  /// the requests in its OpOptions::after: it then ends with CANCELLED (Wait returns that)
  /// and the ops waiting for it end with ABORTED. Once the engine has it, the other ranks
  /// may already be running their part, so it goes on and this is FAILED_PRECONDITION
  /// saying so (also when it has finished). Cancelling withdraws this rank's part only. A
  /// withdrawn collective keeps its place in the communicator's order (the next one does
  /// not meet the other ranks' part of it), so withdraw it on every rank, or theirs runs
  /// into its deadline; a withdrawn send or receive is as if never submitted.
  absl::Status Cancel();

  /// The daemon's id of the op (ids start at 1); 0 once moved from.
  uint64_t op_id() const { return op_id_; }
  /// True once the op's result is known.
  bool done() const { return done_.load(std::memory_order_acquire); }
  /// Algorithm the daemon ran; empty until done().
  const std::string& algorithm() const { return algorithm_; }
  /// Time from submission to completion as measured by the daemon; zero until done().
  absl::Duration elapsed() const { return elapsed_; }
  /// The protocol it ran with, as the policy chose it ("eager": each message of at most
  /// eager_max_bytes goes eagerly while a credit is there, a larger one by rendezvous;
  /// "rendezvous": every message), not how each message went, and its largest rendezvous
  /// segment (0: the data session's); the policy rule that chose (or "built-in") and the
  /// policy's version.
  /// Set once done() for ops that reached the engine.
  const std::string& protocol() const { return protocol_; }
  uint64_t segment_bytes() const { return segment_bytes_; }
  const std::string& chosen_by() const { return chosen_by_; }
  uint64_t policy_version() const { return policy_version_; }

 private:
  friend class Communicator;
  /// `cookie`: the command's key in the session's rings. `report_by`: when the daemon
  /// must have reported the op done (its deadline plus a grace); Wait() and Test() give up
  /// with DEADLINE_EXCEEDED after it, unless the daemon is still delivering results that
  /// found the ring full (ReportBy).
  Request(std::shared_ptr<client::Session> session, uint64_t op_id, uint64_t cookie,
          hw::SteadyTime report_by)
      : session_(std::move(session)),
        op_id_(op_id),
        cookie_(cookie),
        report_by_(report_by),
        record_mu_(std::make_unique<absl::Mutex>()) {}

  // Waits at most until `deadline` for the op's completion; records the result when done.
  absl::Status Poll(hw::SteadyTime deadline);
  // When the daemon must have reported the op: report_by_, or later while it holds
  // completions that found the session's ring full and is still delivering them (the
  // op's may be among them). Records the result if the ring has it by then.
  absl::StatusOr<hw::SteadyTime> ReportBy();
  // DEADLINE_EXCEEDED: the daemon did not report the op by report_by_.
  absl::Status Unreported() const;
  // FAILED_PRECONDITION: Wait, Test and Cancel on a Request whose op moved to another.
  absl::Status MovedFrom() const;

  std::shared_ptr<client::Session> session_;
  uint64_t op_id_ = 0;
  uint64_t cookie_ = 0;
  hw::SteadyTime report_by_;
  // Serialises recording the result: threads waiting at once all get it from the ring.
  std::unique_ptr<absl::Mutex> record_mu_;
  // Set (release) once the fields below hold the op's result; they do not change after.
  std::atomic<bool> done_ = false;
  absl::Status status_;  // the op's result once done_
  std::string algorithm_;
  absl::Duration elapsed_;
  std::string protocol_;
  uint64_t segment_bytes_ = 0;
  std::string chosen_by_;
  uint64_t policy_version_ = 0;
};

}  // namespace cclo
