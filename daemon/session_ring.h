// One session's command and completion rings (layout: cclo/v1/ring.h) as the daemon sees
// them: the sealed memfd mapped here, the two doorbells, the indices the daemon owns, the
// completions that did not fit yet and the finished ops whose results wait for the client
// to consume them.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "cclo/v1/ring.h"

namespace cclo::daemon {

class SessionRing {
 public:
  /// Creates the memfd (sealed against resizing), maps it and makes the doorbells.
  static absl::StatusOr<std::unique_ptr<SessionRing>> Create();
  /// Unmaps and closes everything.
  ~SessionRing();
  SessionRing(const SessionRing&) = delete;
  SessionRing& operator=(const SessionRing&) = delete;

  /// The fds the client gets with WELCOME: memfd, command doorbell (an eventfd), completion
  /// doorbell (the read end of a pipe whose write end stays here). Still owned here.
  std::vector<int> ClientFds() const { return {memfd_, command_doorbell_, completion_doorbell_}; }
  int command_doorbell() const { return command_doorbell_; }

  /// Posts a completion, or keeps it for FlushOverflow when the ring is full; never blocks.
  /// A FINISHED one is remembered for TakeConsumed. Wakes the client if it was posted
  /// (not kept). Any thread.
  void Post(const ring::CompletionSlot& slot);
  /// Post without waking the client; whether it was posted (not kept). For the engine
  /// thread's pass over the ring, which wakes the client once after it.
  bool PostQuietly(const ring::CompletionSlot& slot);
  /// Posts kept completions while there is room, without waking the client; whether any
  /// were posted. For the same pass.
  bool FlushOverflow();
  /// Whether completions wait for room (the client must consume before more commands).
  bool Overflowing() const;

  /// The next command the client posted that the daemon has not taken, copied out of the
  /// ring (the engine thread only); nullopt if there is none. Also snapshots the client's
  /// completion tail for TakeConsumed. An index outside the ring's bounds is
  /// INVALID_ARGUMENT naming it.
  absl::StatusOr<std::optional<ring::CommandSlot>> TakeCommand();
  /// The op ids of OK FINISHED completions the client consumed before posting the commands
  /// taken so far, once all of those were taken; each id is returned once. Engine thread;
  /// valid until its next call.
  absl::Span<const uint64_t> TakeConsumed();
  /// Whether the client consumed completions since the last TakeConsumed (their ops may
  /// be released once the commands posted before are taken). A plain peek.
  bool ConsumedMore() const;
  /// Tells the client's sleeping threads that commands were taken (room) or completions
  /// posted.
  void WakeClient();
  /// Marks the daemon as about to sleep (or awake again) for the client's doorbell logic.
  void SetDaemonSleeping(bool sleeping);
  /// Whether the client posted commands not yet taken (a plain peek; no validation).
  bool HasCommands() const;

 private:
  SessionRing(int memfd, void* base, int command_doorbell, int completion_doorbell,
              int completion_doorbell_writer);
  /// Writes `slot` at the completion head if there is room; false if the ring is full or
  /// the client's tail is out of bounds (then nothing more is posted until it is sane).
  bool PostLocked(const ring::CompletionSlot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Publishes how many completions overflow_ holds: overflowing_ for the engine, and the
  /// header's completions_held for the client.
  void CountHeldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int memfd_;
  void* const base_;  ///< kRingBytes mapped, shared with the client
  ring::RingHeader* const header_;
  const int command_doorbell_;     ///< eventfd, client -> daemon
  const int completion_doorbell_;  ///< pipe read end, the client's: daemon -> client
  const int completion_doorbell_writer_;  ///< its write end, the daemon's alone (non-blocking)

  /// The engine thread's own copy of the command tail (the shared one is for the client).
  uint64_t command_tail_ = 0;
  /// Completion tail and command head read together by the last TakeCommands: the
  /// completions below the tail were consumed before the commands below the head were
  /// posted.
  std::optional<std::pair<uint64_t, uint64_t>> consumed_snapshot_;
  /// The completion tail the last TakeConsumed released up to.
  uint64_t released_tail_ = 0;
  /// What the last TakeConsumed returned (its capacity reused).
  std::vector<uint64_t> consumed_ids_;

  mutable absl::Mutex mu_;  ///< serialises producers of completions
  uint64_t completion_head_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<ring::CompletionSlot> overflow_ ABSL_GUARDED_BY(mu_);
  /// !overflow_.empty(), readable without mu_: the engine asks on every turn.
  std::atomic<bool> overflowing_{false};
  /// OK FINISHED completions posted: (ring index, op id), in index order.
  std::deque<std::pair<uint64_t, uint64_t>> finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cclo::daemon
