// Attached client sessions: identity, owned buffers, communicator handles and ops.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cclo/v1/ring.h"
#include "daemon/buffers.h"
#include "daemon/tenants.h"
#include "hw/clock.h"
#include "hw/device.h"

namespace cclo::daemon {

/// Who is on the other end of an attach connection (from SO_PEERCRED).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// A finished op as Wait reports it.
struct OpResult {
  hw::Completion completion;
  absl::Duration elapsed;
  /// How the engine was told to send: set for ops that reached it.
  hw::Protocol protocol = hw::Protocol::kEager;
  uint64_t segment_bytes = 0;
  /// The policy rule that chose (or "built-in"), and the policy's version.
  std::string chosen_by;
  uint64_t policy_version = 0;
};

/// Hands an op that may start to the engine. Called once, outside the session's lock but
/// under its launch lock (so ops of one communicator handle reach the engine in submission
/// order); must not call the session's op methods except through a later completion. An
/// error means the op could not start: it ends with that status.
using OpStart = std::function<absl::Status(uint64_t op_id)>;

/// Told how an op ended that never reached the engine (aborted, cancelled, expired, its
/// start failed, or its session closed: CANCELLED). Called once, outside the session's lock.
using OpEnded = std::function<void(const absl::Status& status)>;

/// Told an op's result when it ends (not when its session closes), for ops whose results
/// are pushed to the client instead of collected by WaitOp. Called once, outside the
/// session's lock; the result stays in the session until ReleaseOp or WaitOp takes it.
using OpDone = std::function<void(uint64_t op_id, const OpResult& result)>;

/// Names an op in messages, e.g. "allreduce on rank 0 of communicator 1a2b"; formatted only
/// when a message needs it.
struct OpName {
  hw::Collective collective = hw::Collective::kNop;
  uint32_t rank = 0;
  hw::CommId comm{};
  std::string ToString() const;
};

/// An op as Submit registers it. The hooks may be empty; all run outside the session's lock.
struct NewOp {
  uint64_t comm_handle = 0;     ///< ops of one handle start in submission order
  std::vector<uint64_t> after;  ///< ops of this session it waits for (at most kMaxAfter)
  /// Refused while the session keeps this many finished ops whose results were not
  /// collected.
  uint64_t max_uncollected = UINT64_MAX;
  OpName what;
  OpStart start;
  /// Called once the op is registered, before it can start or end.
  std::function<void()> accepted;
  /// Called once, before AddOp returns and before `start` can run, if the op has to wait.
  std::function<void(uint64_t op_id)> held;
  OpEnded ended;
  OpDone done;
};

/// Most ops one op may wait for: what a command-ring slot holds, through the Submit RPC too.
inline constexpr size_t kMaxAfter = ring::kMaxAfter;

/// One client session. Thread-safe.
///
/// Ops: an op waits (held here, no thread of its own) until every op in its `after` list
/// finished OK and every op submitted before it on the same communicator handle started;
/// then OpStart hands it to the engine and its completion arrives through FinishOp. A
/// finished op's result stays until WaitOp collects it; Close() drops everything.
class Session {
 public:
  /// `lease` is the session's charge to its tenant's sessions quota.
  Session(uint64_t id, std::string token, PeerCredentials credentials, int attach_fd,
          TenantPtr tenant, Lease lease)
      : id_(id),
        token_(std::move(token)),
        credentials_(credentials),
        attach_fd_(attach_fd),
        tenant_(std::move(tenant)),
        lease_(std::move(lease)) {}

  uint64_t id() const { return id_; }
  const std::string& token() const { return token_; }
  const PeerCredentials& credentials() const { return credentials_; }
  const TenantPtr& tenant() const { return tenant_; }
  /// When the session attached, on the wall clock (shown as a date).
  absl::Time attached() const { return attached_; }
  /// Sends the buffer's fd to the client, then records the buffer. The send holds only
  /// `send_mu_` (never `mu_`, which op completions on the engine thread take) and is
  /// bounded by the attach socket's send timeout, so a client that stops reading fails
  /// its own AllocBuffer and stalls no one else. The daemon closes its fd once sent (its
  /// mapping stays). `bytes` and `count` (the buffer's charges to the tenant's buffer_bytes
  /// and buffers quotas) are held until the buffer is removed or the session ends and no
  /// op uses it any more.
  absl::Status AddBuffer(SharedBufferPtr buffer, Lease bytes, Lease count);
  absl::Status RemoveBuffer(uint64_t buffer_id);
  /// The buffer if this session owns it, else NOT_FOUND (never says whose it is).
  absl::StatusOr<SharedBufferPtr> FindBuffer(uint64_t buffer_id) const;
  struct BufferUse {
    uint64_t bytes = 0;
    /// Its client freed it while an op used it: its memory and charges stay until the op
    /// ends.
    bool freed = false;
  };
  /// The session's buffers by id, and those its client freed that an op still uses.
  std::map<uint64_t, BufferUse> Buffers() const;
  struct BufferCounts {
    size_t count = 0;
    uint64_t bytes = 0;
  };
  /// Of the buffers Buffers() lists, from one look: the memory their client holds here,
  /// with what it freed that an op still uses.
  BufferCounts CountBuffers() const;

  void AddCommHandle(uint64_t handle);
  bool RemoveCommHandle(uint64_t handle);
  std::vector<uint64_t> CommHandles() const;

  struct OpCounts {
    uint64_t queued = 0;   ///< registered, not started
    uint64_t running = 0;  ///< handed to the engine, not finished
    uint64_t done = 0;     ///< finished, result not collected by WaitOp yet
  };
  OpCounts CountOps() const;
  /// Waits until the session holds no op (each finished and its result collected) or is
  /// closed, or `deadline` passes; returns whether it holds none.
  bool AwaitNoOps(hw::SteadyTime deadline) const;

  /// Registers an op and returns its id (unique within the daemon). The op starts through
  /// `op.start` as soon as it may, possibly before this returns; an op in `op.after` that
  /// already failed ends it at once with ABORTED. INVALID_ARGUMENT for more than kMaxAfter
  /// ids or an id listed twice, NOT_FOUND for an id naming no op of this session that is
  /// still known (never issued here, or collected by WaitOp); then nothing is registered.
  /// RESOURCE_EXHAUSTED while the session keeps `op.max_uncollected` finished ops whose
  /// results nobody collected (WaitOp, ReleaseOp).
  absl::StatusOr<uint64_t> AddOp(NewOp op);
  /// Records the engine's result of a started op, wakes its waiters, and starts or aborts
  /// (ABORTED naming this op) the ops waiting for it.
  void FinishOp(uint64_t op_id, OpResult result);
  /// Ends an op that has not started with CANCELLED (its dependents end with ABORTED).
  /// FAILED_PRECONDITION once it started or finished, NOT_FOUND for an unknown id.
  absl::Status CancelOp(uint64_t op_id);
  /// At an op's deadline: if it has not started, ends it with DEADLINE_EXCEEDED saying
  /// what it still waited for, and returns that status; nullopt otherwise.
  std::optional<absl::Status> ExpireOp(uint64_t op_id);
  /// Waits until the op is done or `timeout` passes. Done ops are released on return.
  /// NOT_FOUND for ids this session never issued or already collected (also when a
  /// concurrent Wait collected it first). When `caller_left` (if given) says, as the wait
  /// ends, that the caller is no longer there to take the result, the op stays for a later
  /// Wait and this is CANCELLED.
  absl::StatusOr<std::optional<OpResult>> WaitOp(
      uint64_t op_id, absl::Duration timeout, const std::function<bool()>& caller_left = nullptr);
  /// Drops the result of a finished op whose OpDone reported it; nothing if it is not
  /// finished or already collected.
  void ReleaseOp(uint64_t op_id);
  /// Whether the op finished and its result is still kept (ReleaseOp would drop it).
  bool HoldsResult(uint64_t op_id) const;
  /// Marks the session closed and drops its ops (waiting ones never start and end
  /// CANCELLED through their OpEnded); pending waits wake and fail.
  void Close();
  /// Whether Close() was called (the client is gone).
  bool closed() const;

 private:
  const uint64_t id_;
  const std::string token_;
  const PeerCredentials credentials_;
  const int attach_fd_;
  const TenantPtr tenant_;
  const absl::Time attached_ = absl::Now();

  enum class OpState { kWaiting, kStarted, kDone };
  struct Op {
    OpState state = OpState::kWaiting;
    uint64_t comm_handle = 0;
    hw::SteadyTime submitted;
    OpName what;
    std::set<uint64_t> waiting_for;    ///< kWaiting: ops of `after` not finished yet
    std::vector<uint64_t> dependents;  ///< ops whose `after` names this one
    OpStart start;                     ///< kWaiting: hands it to the engine
    OpEnded ended;                     ///< kWaiting: told if it never reaches the engine
    OpDone done;                       ///< told its result when it ends
    std::optional<OpResult> result;    ///< kDone
  };
  /// An op taken out of its queue to start.
  struct ReadyOp {
    uint64_t id = 0;
    OpStart start;
    OpEnded ended;
  };

  /// Reports unstarted ends and results, and starts every op that may start, one at a time, until
  /// none is left.
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(launch_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  /// Takes the next op that may start (front of its handle's queue, nothing left to wait
  /// for) out of the queue and marks it started; nullopt if there is none.
  std::optional<ReadyOp> TakeReadyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Ends a waiting or started op with `result` and settles the ops waiting for it: an OK
  /// end lets them go on, any other aborts them (ABORTED naming it), transitively. Waiting
  /// ops' OpEnded calls are queued in `unstarted_ends_` for Pump to make.
  void EndLocked(uint64_t op_id, OpResult result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Erases `handle`'s queue if it is empty and the session no longer holds the handle.
  void DropQueueLocked(uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  /// Serialises frames on the attach socket and orders them before Close().
  absl::Mutex send_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  /// Held while ops are registered, settled and started, so that ops of one handle reach
  /// the engine in submission order.
  absl::Mutex launch_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  /// Each owns its charges to the tenant (AddBuffer), shared with the ops that use it.
  std::map<uint64_t, SharedBufferPtr> buffers_ ABSL_GUARDED_BY(mu_);
  /// Buffers its client freed, until the last op that used them lets them go.
  std::map<uint64_t, std::weak_ptr<SharedBuffer>> freed_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> comm_handles_ ABSL_GUARDED_BY(mu_);
  /// Every op not collected yet, by id.
  std::map<uint64_t, Op> ops_ ABSL_GUARDED_BY(mu_);
  /// Waiting ops per communicator handle, in submission order. A handle's queue stays,
  /// empty, while the session holds the handle, so that an op does not make and free a
  /// deque (a map node, its block array and a 512-byte block) when it is the only one.
  std::map<uint64_t, std::deque<uint64_t>> waiting_by_handle_ ABSL_GUARDED_BY(mu_);
  /// Ends of ops that never reached the engine, to report outside the lock.
  std::vector<std::pair<OpEnded, absl::Status>> unstarted_ends_ ABSL_GUARDED_BY(mu_);
  /// Results to report through OpDone outside the lock.
  struct DoneReport {
    OpDone done;
    uint64_t op_id = 0;
    OpResult result;
  };
  std::vector<DoneReport> done_reports_ ABSL_GUARDED_BY(mu_);
  /// How many ops in `ops_` are done (their results not collected).
  uint64_t done_ops_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  Lease lease_ ABSL_GUARDED_BY(mu_);  ///< on the tenant's sessions quota, until Close()
};

using SessionPtr = std::shared_ptr<Session>;

/// All live sessions, by token and by id. Thread-safe.
class SessionRegistry {
 public:
  /// A new session of `tenant`, holding `lease` on its sessions quota.
  SessionPtr Create(PeerCredentials credentials, int attach_fd, TenantPtr tenant, Lease lease);
  /// The session holding `token`, or UNAUTHENTICATED.
  absl::StatusOr<SessionPtr> FindByToken(const std::string& token) const;
  /// Removes and returns the session (nullptr if unknown).
  SessionPtr Remove(uint64_t session_id);
  std::vector<SessionPtr> All() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, SessionPtr> by_token_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, SessionPtr> by_id_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace cclo::daemon
