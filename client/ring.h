// libcclo's side of the session's command and completion rings (layout: cclo/v1/ring.h):
// posts commands, and dispatches the completions to their waiters by cookie. Waiting
// spins briefly, then sleeps on the completion doorbell.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cclo/v1/client.pb.h"
#include "cclo/v1/ring.h"
#include "hw/clock.h"

namespace cclo::client {

/// Thread-safe.
class ClientRing {
 public:
  /// Says whether the daemon still holds the session: OK, or why not.
  using AliveFn = std::function<absl::Status()>;
  /// Longest sleep on the doorbell before a waiter calls the AliveFn.
  static constexpr absl::Duration kAliveCheck = absl::Milliseconds(100);

  /// Maps the rings the WELCOME frame carried (`bytes` as it said) and takes the fds.
  /// A size, magic or version other than this library's is FAILED_PRECONDITION.
  static absl::StatusOr<std::unique_ptr<ClientRing>> Map(int memfd, uint64_t bytes,
                                                         int command_doorbell,
                                                         int completion_doorbell, AliveFn alive,
                                                         absl::Duration alive_check = kAliveCheck);
  ~ClientRing();
  ClientRing(const ClientRing&) = delete;
  ClientRing& operator=(const ClientRing&) = delete;

  /// An op `after` names: the cookie of its command and its op id.
  struct Dependency {
    uint64_t cookie = 0;
    uint64_t op_id = 0;
  };
  /// The daemon's answer to a command.
  struct Accepted {
    uint64_t op_id = 0;
    uint32_t timeout_ms = 0;  ///< the op's deadline from submission
  };

  /// Posts `request` (its `after` filled from `after` here: a dependency whose OK result
  /// this process already has is left out) and waits for the daemon's answer, both by
  /// `deadline`. Returns the command's cookie with
  /// the answer; a refusal is the daemon's error.
  absl::StatusOr<std::pair<uint64_t, Accepted>> Submit(v1::SubmitRequest request,
                                                       const std::vector<Dependency>& after,
                                                       hw::SteadyTime deadline);
  /// The result of the op of `cookie`, waiting until `deadline` (nullopt then). The first
  /// call that finds it has the daemon release a failed one; the ring keeps it for every
  /// other caller waiting on the same cookie (threads waiting on one Request) until
  /// Forget(cookie). The result is the op's FINISHED completion slot.
  absl::StatusOr<std::optional<ring::CompletionSlot>> Finished(uint64_t cookie,
                                                               hw::SteadyTime deadline);
  /// While the daemon holds completions that found the ring full (this process consumed
  /// none for a while: busy or stopped), `grace` past the last time the ring brought any,
  /// as the daemon is still delivering; otherwise, and in a forked child, the infinite past.
  /// Consumes after it asks: a completion the daemon moved into the ring before it said it
  /// holds none is here when this returns.
  hw::SteadyTime HeldUntil(absl::Duration grace);
  /// Drops what the ring holds or will receive for `cookie` (its request is gone).
  /// Does nothing in a forked child.
  void Forget(uint64_t cookie);

  /// Marks the session ended here (its Client was destroyed): from now on Submit fails
  /// before it posts, and so does CheckOpen.
  void Close() { closed_.store(true, std::memory_order_relaxed); }

  /// InAttachingProcess's answer, then FAILED_PRECONDITION ("the session is closed") once
  /// Close was called: what every call that would reach the daemon for the session checks
  /// first (Submit here, the RPCs of Communicators and Requests).
  absl::Status CheckOpen() const;

  /// OK in the process that attached. In a forked child FAILED_PRECONDITION: the rings are
  /// shared memory the child inherited, and its posts or consumption would corrupt the
  /// parent's session (and a lock held at the fork stays held). Submit and Finished check it.
  absl::Status InAttachingProcess() const;

  /// OK unless libcclo made a gRPC channel (CountForks) in a process this one was forked
  /// from: FAILED_PRECONDITION then, saying why a forked child cannot attach. Session::Open
  /// asks before it connects.
  static absl::Status NoForkSinceAttach();
  /// Counts this process's forks from now on: Session::Open calls it as it makes a gRPC
  /// channel, which a forked child could not use (an attach that failed before leaves its
  /// children free to attach).
  static void CountForks();

 private:
  ClientRing(int memfd, void* base, int command_doorbell, int completion_doorbell, AliveFn alive,
             absl::Duration alive_check);

  /// Consumes every posted completion into the maps below.
  void ConsumeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Calls `ready` (under mu_, after consuming) until it returns true, spinning briefly,
  /// then sleeping on the completion doorbell; DEADLINE_EXCEEDED at `deadline`.
  absl::Status Await(absl::FunctionRef<bool()> ready, hw::SteadyTime deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  /// One sleep of Await, with client_waiters raised: OK if `ready` held before it slept,
  /// the ring's or the session's error, or nullopt after waking or napping (look again).
  /// One thread sleeps on the doorbell at a time: a wake-up clears it for every reader.
  std::optional<absl::Status> Sleep(absl::FunctionRef<bool()> ready, hw::SteadyTime deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  /// Whether the command ring has room for one more command.
  bool RoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Writes `slot` at the command head and publishes it; there must be room.
  void PostLocked(const ring::CommandSlot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Posts RELEASE commands for `to_release_` while there is room.
  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Rings the daemon's doorbell if it sleeps.
  void WakeDaemon();
  /// The session's liveness, asked at most every alive_check_ (OK in between).
  absl::Status AliveNow();

  const pid_t attaching_process_;
  const uint64_t attaching_forks_;  ///< forks (ring.cc) when it was mapped
  const int memfd_;
  void* const base_;
  ring::RingHeader* const header_;
  const int command_doorbell_;
  const int completion_doorbell_;  ///< the read end of the daemon's pipe (ring.h)
  /// An eventfd of this process's own, polled beside the completion doorbell: how a thread
  /// that consumed what the doorbell's sleeper waits for wakes it (-1 if none could be made:
  /// the sleeper then wakes at its next alive check).
  const int self_doorbell_;
  const AliveFn alive_;
  /// Set by Close; read by CheckOpen.
  std::atomic<bool> closed_{false};
  const absl::Duration alive_check_;
  /// When AliveNow last asked (or the ring was mapped), ns on the monotonic clock (since
  /// hw::SteadyTime(), its epoch).
  std::atomic<int64_t> last_alive_check_ns_{
      absl::ToInt64Nanoseconds(hw::SteadyNow() - hw::SteadyTime())};

  absl::Mutex mu_;
  uint64_t command_head_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completion_tail_ ABSL_GUARDED_BY(mu_) = 0;
  /// When ConsumeLocked last found completions (or the ring was mapped).
  hw::SteadyTime last_news_ ABSL_GUARDED_BY(mu_) = hw::SteadyNow();
  uint64_t next_cookie_ ABSL_GUARDED_BY(mu_) = 1;
  /// Set once the daemon stopped serving the ring (or the ring is corrupt): every wait
  /// fails with it.
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, absl::StatusOr<Accepted>> answers_ ABSL_GUARDED_BY(mu_);
  /// FINISHED completions by cookie.
  std::map<uint64_t, ring::CompletionSlot> finished_ ABSL_GUARDED_BY(mu_);
  /// FINISHED completions already returned by Finished, kept for the other waiters of
  /// their cookie until Forget.
  std::map<uint64_t, ring::CompletionSlot> collected_ ABSL_GUARDED_BY(mu_);
  /// Failed ops whose results this process collected or dropped, for the daemon to
  /// release (ring.h); posted as room allows.
  std::vector<uint64_t> to_release_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> forgotten_ ABSL_GUARDED_BY(mu_);
  /// Whether a thread sleeps on the completion doorbell. Only one does; the other waiting
  /// threads wait on mu_ for news from it (`consumed_` moving, or its place coming free).
  /// A thread that consumes completions while it sleeps rings self_doorbell_ for it: what
  /// was consumed may be what it waits for.
  bool doorbell_sleeper_ ABSL_GUARDED_BY(mu_) = false;
  /// How many times completions were consumed.
  uint64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cclo::client
