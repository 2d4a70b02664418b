// Turns a client's Submit into an engine call: checks every field, the communicator
// handle and each buffer reference (ownership, bounds, count overflow), registers the op
// with its session (which holds it while it waits for the ops in its `after` list) and
// hands it to the engine when the session lets it start. One thread ends held ops at their
// deadlines; nothing else runs per op.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cclo/v1/client.pb.h"
#include "cclo/v1/ring.h"
#include "daemon/communicators.h"
#include "daemon/drain.h"
#include "daemon/op_request.h"
#include "daemon/op_stats.h"
#include "daemon/sessions.h"
#include "hw/clock.h"
#include "hw/device.h"

namespace cclo::daemon {

/// Payload of a Submit refused for a full in-flight ops quota: how many milliseconds to wait
/// before retrying; also the name of the trailing metadata that carries it to the client.
inline constexpr char kRetryAfterMs[] = "cclo-retry-after-ms";

/// What the Wait RPC reports of a finished op.
cclo::v1::WaitResponse ToWaitResponse(const OpResult& result);
/// The FINISHED completion of op `op_id` for command `cookie`: the same fields, for the
/// completion ring.
ring::CompletionSlot ToCompletion(uint64_t cookie, uint64_t op_id, const OpResult& result);

/// An accepted op: its id, and its deadline in ms from its submission.
struct Accepted {
  uint64_t op_id = 0;
  uint32_t timeout_ms = 0;
};

class Ops {
 public:
  /// Every op that ends is counted in `stats`.
  /// New ops are refused while `drain` does not admit them.
  Ops(hw::Device* device, Communicators* communicators, OpStats* stats, const Drain* drain,
      absl::Duration default_deadline);
  /// Stops the deadline thread; ops still held are left to their sessions.
  ~Ops();
  /// Starts the deadline thread, which ends held ops at their deadlines (UNAVAILABLE if no
  /// thread can be had). Call once, before the first Submit.
  absl::Status StartDeadlines();
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;

  /// Validates the op and registers it; it starts once its `after` ops finished OK (at once
  /// without any) and its result arrives through Session::WaitOp. The deadline counts from
  /// now, waiting included: an op still held then ends with DEADLINE_EXCEEDED and breaks
  /// its communicator, as an engine call past its deadline does. With `done`, the result
  /// is also reported through it (see OpDone) when the op ends. A wait for room
  /// (wait_for_room) also ends when the session closes, or when `caller_wants` says so.
  absl::StatusOr<Accepted> Submit(const SessionPtr& session, OpRequest request,
                                  OpDone done = nullptr,
                                  const Tenant::StillWanted& caller_wants = nullptr);

  /// What Submit would answer `request` before it looks at the quota: its fields, the
  /// communicator, the buffers and the algorithm. Registers nothing.
  absl::Status Check(const SessionPtr& session, OpRequest request) const;

  /// Counts a Submit answered with `refusal` (by Submit, a drain or a bad command); a
  /// caller that retries counts only the answer it gives.
  void CountRefused(const absl::Status& refusal);

  /// How long `request`'s op may take: its own timeout, else the daemon's default.
  absl::Duration TimeoutOf(const OpRequest& request) const {
    return request.timeout_ms > 0 ? absl::Milliseconds(request.timeout_ms) : default_deadline_;
  }

  /// The session ended, dropping its held ops: stops watching their deadlines, so that
  /// nothing of the session is kept until then. Call after Session::Close().
  void EndSession(const SessionPtr& session);

 private:
  /// Key of a watched op: its deadline, then its (daemon-unique) id.
  using WatchKey = std::pair<hw::SteadyTime, uint64_t>;

  /// Watches an op held by `session` until its deadline (not if the session closed).
  void Watch(WatchKey key, const SessionPtr& session);
  /// Stops watching an op that started.
  void Unwatch(WatchKey key);
  /// The deadline thread: expires each watched op at its deadline if it is still held.
  void ExpireLoop();

  /// What the hooks of one op share (ops.cc).
  struct Launch;
  /// Submit's checks, and the call they make of `request` (its algorithm moved there).
  absl::StatusOr<std::shared_ptr<Launch>> Prepare(const SessionPtr& session,
                                                  OpRequest& request) const;
  /// The op's start: hands it to the engine unless it can no longer run.
  absl::Status Start(const std::shared_ptr<Launch>& launch, uint64_t op_id);

  hw::Device* const device_;
  Communicators* const communicators_;
  OpStats* const stats_;
  const Drain* const drain_;
  const absl::Duration default_deadline_;

  absl::Mutex mu_;
  absl::CondVar wake_;
  /// Held ops by deadline, with the session holding each.
  std::map<WatchKey, std::weak_ptr<Session>> watched_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread expire_thread_;  // runs ExpireLoop from StartDeadlines; joined by the destructor
};

}  // namespace cclo::daemon
