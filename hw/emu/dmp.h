// The data-movement processor (DMP): executes the Programs of calls, move by move.
//
// Each call waits in its (communicator, rank) queue and starts once every call ahead of it
// finished; a send or receive starts once every call ahead of it is a send or receive
// that started and none of them writes memory it uses (or uses memory it writes). So
// point-to-point calls of a rank run side by side, as MPI's nonblocking ones do (a
// receive posted before the send that meets it waits for nothing), a send of what a
// receive ahead of it fills waits for that receive, and a collective runs alone. Calls start in
// submission order, and when a call starts, every network move gets its sequence number in program
// order, so the k-th send from s to d with tag t meets the k-th receive at d. Moves start in
// program order once their deps are done:
//   memory -> memory   copied or reduced at once;
//   memory -> network  to another engine: eager (one segment, on one of the link's
//                      credits) when the message is small enough and a credit is there,
//                      else a rendezvous request, and on the clear-to-send the data in
//                      segments, all written straight from the call's memory. A sender
//                      never waits for credits: without one it goes rendezvous. To a rank
//                      on this engine: handed to the RBM, which stages it (eager) or
//                      copies it once the receive is posted (local rendezvous);
//   network -> memory  posted to the RBM, which applies segments as they arrive.
// The engine work of moves goes through the Scheduler, one unit at a time, charged to
// the call's tenant: memory moves one unit of memory each (the unit size when the move
// starts: SetUnitBytes, see UnitBytes() in emu_device.h; a move whose result partly
// overlaps an operand in one piece), network sends one segment handed to the session
// each (eager message, rendezvous request, each data segment after the clear-to-send).
// Serve() runs them. Not scheduled: reducing a send's operands (done at its start), local
// deliveries through the RBM and arrivals (the session reads at most a turn's bytes of a
// segment per engine turn, and the RBM reduces the whole elements landed so far after
// each read, copies land in place).
// Completions only mark calls ready; Progress() runs them in a loop, so nothing recurses.
// A call's scratch memory comes from a ScratchPool when it starts and goes back to it
// once the call is finished, so big scratch is not mapped and faulted in anew every call.
// A rank that left (Communicator::departed) can send and receive nothing more: a call that
// still needs it to (a send to it, a receive from it whose message is not all staged)
// fails with the reason, at its start or at the departure. A failing call starts no more
// moves, gives up its receives, lets go of its sends that wait for their receive (their
// data is copied and still goes if the receive comes), and completes once none of its
// segments is still queued on a session or landing in its memory. Other calls go on.
// Cost per move: O(segments); no thread per call.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "hw/call.h"
#include "hw/clock.h"
#include "hw/device.h"
#include "hw/emu/communicator.h"
#include "hw/emu/rbm.h"
#include "hw/emu/scheduler.h"
#include "hw/emu/scratch_pool.h"
#include "hw/poe/engine.h"
#include "hw/program.h"

namespace cclo::hw::emu {

/// Device-wide counters; written on the engine thread, read from any.
struct Counters {
  std::atomic<uint64_t> calls_completed{0};
  std::atomic<uint64_t> calls_failed{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_received{0};
  /// Links of the configured communicators by LinkState.
  std::array<std::atomic<uint64_t>, kLinkStates> links{};
  /// Links whose sessions the peer's side ended without a goodbye, ever.
  std::atomic<uint64_t> links_lost{0};
  std::atomic<uint64_t> wire_errors{0};
  std::atomic<uint64_t> eager_messages{0};       ///< sends that went eagerly
  std::atomic<uint64_t> rendezvous_messages{0};  ///< sends that went by rendezvous
  std::atomic<uint64_t> eager_fallbacks{0};      ///< of those, small ones short of room
  std::atomic<uint64_t> turn_bytes{poe::kTurnBytes};
};

/// A call from submission to completion.
struct CallState {
  struct MoveState {
    uint64_t sequence = 0;
    bool done = false;
    uint64_t segments_left = 0;         ///< units or segments not yet done
    const std::byte* source = nullptr;  ///< send: where the data is read from
    std::vector<std::byte> reduced;     ///< reduce sent to the network: op0 (+) op1
  };

  uint64_t id = 0;
  CallDescriptor desc;
  CallBuffers buffers;
  Program program;
  SteadyTime deadline;
  CompletionFn done;
  Communicator* comm = nullptr;  ///< outlives the call: a communicator fails its calls first
  std::vector<MoveState> moves;
  ScratchPool::Buffer scratch;  ///< Slot::kScratch, taken when the call starts
  size_t next_move = 0;         ///< the next move to start, in program order
  size_t moves_done = 0;
  uint64_t bytes_sent = 0;
  bool running = false;
  absl::Status failure;  ///< not OK: the call fails with it once nothing is in flight
  /// Not OK: withdrawn before it reached the engine (Device::Withdraw). It takes its
  /// sequence numbers and ends at once with this, moving nothing, and is not counted.
  absl::Status withdrawn;

  /// What its messages carry and its receives expect.
  CallSignature Signature() const { return SignatureOf(desc, program.algorithm_place); }
};

class Dmp {
 public:
  struct Hooks {
    /// The up link that reaches `rank` of `comm` (a rank on another engine), or nullptr.
    std::function<PeerLink*(Communicator& comm, uint32_t rank)> link_for;
    /// Breaks `comm` after a failure in the middle of a call.
    std::function<void(Communicator& comm, absl::Status reason)> fail;
    /// Breaks `comm` because what rank `source` sent does not fit the receive posted for it.
    std::function<void(Communicator& comm, uint32_t source, absl::Status problem)> invalid;
    /// Units were scheduled outside Serve while none were: Serve must run soon.
    std::function<void()> wake;
  };

  /// Messages of at most `eager_bytes` may go eagerly (0: none); memory moves run in
  /// units of `unit_bytes`, the scheduler's quantum; the calls running hold at most
  /// `scratch_max_bytes` of scratch in all.
  Dmp(Rbm& rbm, uint64_t eager_bytes, uint64_t unit_bytes, uint64_t scratch_max_bytes,
      Counters& counters, Hooks hooks);

  /// Replaces how units are shared between tenants, and their scratch limits.
  void SetScheduling(const Scheduling& scheduling) {
    scheduler_.Configure(scheduling);
    scratch_pool_.SetTenantLimits(scheduling.scratch_bytes);
  }

  /// Memory moves started from now on run in units of `unit_bytes` (> 0), which is also
  /// the scheduler's quantum from its next turn on.
  void SetUnitBytes(uint64_t unit_bytes);

  bool fair() const { return scheduler_.fair(); }

  /// Runs `piece` (then Progress) as one unit of `tenant` in the scheduler's turns: the
  /// RBM's pieces of local messages (Rbm::DeferFn).
  void Defer(uint32_t tenant, std::function<void()> piece);

  /// `tenant` had engine work that is not scheduled: data of its call arrived.
  void NoteActive(uint32_t tenant) { active_tenants_.insert(tenant); }

  /// The tenants that queued or ran units of engine work, or were noted active, since the
  /// last call.
  absl::flat_hash_set<uint32_t> TakeActiveTenants() { return std::exchange(active_tenants_, {}); }

  /// Progress(), then runs scheduled units worth about `budget` bytes; returns whether
  /// any are left.
  bool Serve(uint64_t budget);

  /// Queues a checked call behind the earlier calls of its (communicator, rank).
  void Submit(std::unique_ptr<CallState> call);

  /// Starts and finishes moves until nothing more can happen now. Run after every event.
  void Progress();

  /// A clear-to-send for a rendezvous send of `comm` arrived: its data goes now. An
  /// error names what is wrong with it (no such send waits, or its size differs).
  absl::Status ClearToSend(Communicator& comm, const poe::SegmentHeader& header);

  /// Completes every call of `comm` with `status`, except `expired` (a call id, 0 for
  /// none) which gets `expired_status`. Their memory is no longer touched. The caller has
  /// closed the sessions of `comm` first, so none of their segments is in flight.
  void FailCalls(Communicator& comm, const absl::Status& status, uint64_t expired = 0,
                 const absl::Status& expired_status = absl::OkStatus());

  /// Ranks of `comm` left (comm.departed grew, their sessions are closed and the RBM
  /// dropped their unfinished messages): running calls that need them fail.
  void Depart(Communicator& comm);

  /// The earliest call deadline, SteadyTime::InfiniteFuture() if none.
  SteadyTime NextDeadline() const;

  /// A call whose deadline is at or before `now`, or nullptr.
  const CallState* Expired(SteadyTime now) const;

  /// What `call` waits for, for the error when it misses its deadline: how many of its
  /// moves are done, and how far the first few started ones that are not have come.
  std::string Waiting(const CallState& call) const;

  /// Waiting() of the started calls of `comm` not yet finished (the first 8, then "and N
  /// more"), each after "<collective> on rank <r>: ", joined by " | "; "none" if there is
  /// none. For the log when `comm` breaks or a rank of it leaves.
  std::string Running(const Communicator& comm) const;

  /// Where calls take their scratch memory and give it back when they are done.
  const ScratchPool& scratch_pool() const { return scratch_pool_; }

 private:
  void Start(CallState& call);
  /// Starts the calls of a (communicator, rank) queue that may start now.
  void StartQueued(const std::deque<uint64_t>& queue);
  void Advance(CallState& call);
  bool DepsDone(const CallState& call, size_t index) const;
  absl::Status StartMove(CallState& call, uint32_t index);
  /// A memory -> memory move, in units of a segment.
  absl::Status StartMemoryMove(CallState& call, uint32_t index);
  absl::Status StartSend(CallState& call, uint32_t index);
  /// Schedules `work` for `call` as one unit of `bytes`; it runs (then Progress) if the
  /// call is still running, failing or not: a started move's units still finish.
  void Schedule(const CallState& call, uint64_t bytes, std::function<void(CallState&)> work);
  /// `tenant` has work for the scheduler: wakes the engine if it has none yet.
  void Activate(uint32_t tenant);
  /// Schedules handing one segment of a network send of `call` to the session that reaches
  /// its destination (none once that peer left); on_written completes the move once all
  /// its segments are written.
  void ScheduleSegment(const CallState& call, uint32_t index, const poe::SegmentHeader& header,
                       const std::byte* payload);
  /// Queues the request of the awaited rendezvous send of `key` on its session, once.
  void Ask(Communicator& comm, const MessageKey& key);
  /// A send to a rank on this engine, handed to the RBM.
  absl::Status SendLocal(CallState& call, uint32_t index, uint64_t bytes);
  MessageKey SendKey(const CallState& call, uint32_t index) const;
  absl::Status StartReceive(CallState& call, uint32_t index);
  MessageKey ReceiveKey(const CallState& call, uint32_t index) const;
  /// The reason of a departed rank that a move of `call` not yet done still needs, or OK.
  absl::Status Unreachable(const CallState& call) const;
  /// Makes `call` fail with `status`: no more moves start, its receives are given up.
  void Doom(CallState& call, const absl::Status& status);
  /// Posts the receives failing `call` never started to receive into nothing; a message of
  /// another size is reported invalid (hooks.invalid, which may finish the call).
  void DiscardUnstarted(CallState& call);
  /// A started move of `call` still has segments queued on a session or landing in its
  /// memory (never on the session of a rank that left).
  bool InFlight(const CallState& call) const;
  /// Lets go of a started send of a failing call that waits for its receive: true when
  /// it no longer reads the call's memory.
  bool LetGo(CallState& call, uint32_t index);
  void MoveDone(uint64_t call_id, uint32_t index);
  /// on_written of a network send's segment; an event, so it ends with Progress().
  void SegmentWritten(uint64_t call_id, uint32_t index);
  void Finish(CallState& call, const absl::Status& status);
  std::byte* Address(const CallState& call, const Endpoint& endpoint) const;
  void MarkReady(uint64_t call_id) { ready_.push_back(call_id); }

  /// A rendezvous send waiting for its clear-to-send.
  enum class Request : uint8_t { kUnsent, kQueued, kWritten };
  struct AwaitedSend {
    uint64_t call_id = 0;  ///< 0 once let go: then `copy` holds the data
    uint32_t index = 0;
    uint64_t bytes = 0;
    CallSignature call;    ///< what its request carries
    uint64_t segment = 0;  ///< bytes per data segment, a whole number of elements
    const std::byte* source = nullptr;
    std::shared_ptr<const std::vector<std::byte>> copy;
    Request request = Request::kUnsent;  ///< its request: queued on the session, written
  };

  Rbm& rbm_;
  const uint64_t eager_bytes_;
  uint64_t unit_bytes_;
  Counters& counters_;
  Hooks hooks_;
  absl::flat_hash_map<MessageKey, AwaitedSend> awaited_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<CallState>> calls_;
  absl::flat_hash_set<uint32_t> active_tenants_;  ///< since TakeActiveTenants
  /// Freed at the end of Progress, their scratch given back to scratch_pool_.
  std::vector<std::unique_ptr<CallState>> finished_;
  ScratchPool scratch_pool_;
  std::set<std::pair<SteadyTime, uint64_t>> deadlines_;
  std::deque<uint64_t> ready_;  ///< calls that may advance
  Scheduler scheduler_;
  bool progressing_ = false;
  bool serving_ = false;
};

}  // namespace cclo::hw::emu
