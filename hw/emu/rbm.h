// The rx-buffer manager (RBM): matches messages to posted receives by (communicator, src,
// dst, tag, sequence), owns the eager rx buffer pool and the eager credits that share it
// out among peer engines (DESIGN 7). A message comes one of three ways:
//
//  - Eager (from a peer, on one of its credits): one segment holding the whole message.
//    If its receive is posted it lands straight in the destination (a reduce receive:
//    in the caller's one-segment scratch, then reduced with the memory operand into the
//    result); if not, it is staged in a pool buffer and applied when the receive is
//    posted. Its credit becomes returnable once it is applied.
//  - Rendezvous (from a peer): a request announces it; once its receive is posted too,
//    the RBM asks for a clear-to-send (the clear_to_send hook) and the data segments then
//    land like posted eager ones, segment by segment. Data without a clear-to-send, or
//    beyond what was announced, is an error. A peer link may have at most
//    `max_waiting_requests` requests waiting for their receives (each holds a few hundred
//    bytes until its receive is posted or the communicator goes); one more is an error,
//    so a peer cannot grow the RBM without bound.
//  - Local (from a rank on this engine): staged in a pool buffer that no credit claims
//    when small enough, one is free and its communicator has fewer than `local_credits`
//    local messages staged (eager: a communicator's ranks here count as one more peer
//    link, so that none holds more of the pool by sending among its own ranks than a peer
//    may); otherwise its source is kept and copied (or reduced) straight into the
//    destination when the receive is posted (local rendezvous). on_sent says when the
//    source is no longer read. While tenants share the engine, a local rendezvous message
//    of more than a piece is applied a piece at a time in the engine's turns (DeferFn), so
//    that a big one takes its share, not all of it.
//
// Credits: the pool is cut into buffers of max(eager_bytes, 4 KiB). A credit account per
// peer link reserves some of them (OpenAccount): its peer may have that many eager
// messages unapplied. An account opened while the pool was short reserves the buffers it
// lacks as they are freed, before local messages may take them. The free buffers never
// fall below what open accounts may still claim, so an eager message within its credits
// always finds room, and one beyond them is an error: no session ever waits for pool
// space. TakeCredits hands out again what was freed, in batches of half an account's
// credits (rounded down, at least one), or at once while its peer holds fewer than that.
//
// Cost: one copy for a staged message, none otherwise; O(1) hash lookups per segment.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hw/poe/wire.h"
#include "hw/program.h"
#include "hw/types.h"

namespace cclo::hw::emu {

/// One message: the sequence-th from src to dst with tag on comm.
struct MessageKey {
  CommId comm{};
  uint32_t src = 0;
  uint32_t dst = 0;
  uint32_t tag = 0;
  uint64_t sequence = 0;

  static MessageKey Of(const poe::SegmentHeader& header) {
    return {header.comm, header.src, header.dst, header.tag, header.sequence};
  }
  bool operator==(const MessageKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const MessageKey& k) {
    return H::combine(std::move(h), k.comm, k.src, k.dst, k.tag, k.sequence);
  }
};

/// Where a posted receive puts its message.
struct RxTarget {
  uint64_t bytes = 0;                         ///< the message size the receive expects
  CallSignature call;                         ///< the call it is of: the message's must match
  Function function = Function::kCopy;        ///< copy: result = data; reduce: see below
  std::byte* result = nullptr;                ///< null: the data is discarded (copy only)
  const std::byte* memory_operand = nullptr;  ///< reduce: the operand that is in memory
  bool network_is_op0 = true;                 ///< reduce: result = net (+) mem, or mem (+) net
  DataType datatype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  std::function<void()> on_complete;  ///< every byte applied
};

class Rbm {
 public:
  /// Runs when a rendezvous message may come: its request arrived and its receive is
  /// posted. The caller sends the clear-to-send for `key` (a message of `total` bytes).
  using ClearToSendFn = std::function<void(const MessageKey& key, uint64_t total)>;
  /// Runs `piece` later, in a turn of the engine's scheduler charged to `comm`'s tenant
  /// (or never, once `comm` is gone).
  using DeferFn = std::function<void(const CommId& comm, std::function<void()> piece)>;

  /// Smallest pool buffer, whatever the eager limit.
  static constexpr uint64_t kMinBufferBytes = 4096;

  /// A pool of pool_bytes cut into buffers of max(eager_bytes, kMinBufferBytes); eager
  /// messages of at most eager_bytes and rendezvous segments of at most segment_bytes
  /// are accepted, and per peer link at most max_waiting_requests rendezvous requests
  /// whose receive is not posted. Per communicator at most local_credits local messages
  /// are staged at once. Local rendezvous messages are applied whole until SetPieceBytes
  /// sets a piece.
  Rbm(uint64_t pool_bytes, uint64_t eager_bytes, uint64_t segment_bytes,
      uint64_t max_waiting_requests, uint32_t local_credits, ClearToSendFn clear_to_send,
      DeferFn defer);

  /// Local rendezvous messages applied from now on go in pieces of at most `bytes` (> 0;
  /// rounded down to whole elements), or whole (kWhole).
  void SetPieceBytes(uint64_t bytes) { piece_bytes_ = bytes; }
  static constexpr uint64_t kWhole = UINT64_MAX;

  uint64_t pool_bytes() const { return buffer_count_ * buffer_bytes_; }
  /// Thread-safe: bytes of the buffers holding staged messages.
  uint64_t used_bytes() const { return used_bytes_.load(); }
  /// Thread-safe: the most bytes used at once since the start, which is also the memory of
  /// the pool this process has touched (a buffer is taken from those freed last, a new one
  /// only when all touched ones hold messages) and keeps.
  uint64_t peak_bytes() const { return peak_bytes_.load(); }
  /// Thread-safe: bytes of the buffers reserved by open credit accounts.
  uint64_t reserved_bytes() const { return reserved_bytes_.load(); }

  /// An open credit account and the credits first granted on it.
  struct Grant {
    uint64_t account = 0;  ///< never 0
    uint32_t credits = 0;
  };
  /// Opens a credit account for one peer link, reserving up to `credits` buffers that
  /// no one else claims (fewer when the pool is short: the rest as buffers are freed,
  /// granted by TakeCredits) and granting them all.
  Grant OpenAccount(uint32_t credits);
  /// Releases the account's reservation; its staged messages stay until applied or
  /// dropped, and its credits are no longer handed out.
  void CloseAccount(uint64_t account);
  /// The freed credits of each account that has a batch of them (half its credits, rounded
  /// down, at least one) or whose peer holds fewer than a batch, now granted again.
  std::vector<std::pair<uint64_t, uint32_t>> TakeCredits();

  /// Posts a receive and applies what arrived for it; on_complete may run inside.
  absl::Status Post(const MessageKey& key, RxTarget target);

  /// A rendezvous request arrived from a peer, on the link of credit account `account`.
  /// Refused when its receive is not posted and that link already has
  /// max_waiting_requests requests waiting for their receives.
  absl::Status Request(const poe::SegmentHeader& header, uint64_t account);

  /// Where the payload of an eager or rendezvous data segment goes: the destination,
  /// `scratch` (room for segment_bytes), or a pool buffer. An eager message spends a
  /// credit of `account`. Errors name what does not match.
  absl::StatusOr<std::byte*> Land(const poe::SegmentHeader& header, std::byte* scratch,
                                  uint64_t account);

  /// The first `landed` bytes of the payload of the segment last given a place by Land
  /// are there (more follow): a reduce into a posted receive applies the whole elements
  /// among them now, so reducing overlaps receiving.
  absl::Status LandedPart(const poe::SegmentHeader& header, uint64_t landed);

  /// The payload of the segment last given a place by Land is there: apply or stage what
  /// LandedPart has not applied.
  absl::Status Landed(const poe::SegmentHeader& header);

  /// A message of `bytes` of a `call` from a rank on this engine, read from `data`: applied if its
  /// receive is posted (at once, or in pieces when bigger than a piece), else staged when
  /// `eager`, a buffer is free and its communicator has fewer than local_credits local
  /// messages staged, else kept until the receive is posted. on_sent runs
  /// (maybe inside) once `data` is no longer read. Returns whether it went eagerly (at
  /// once) rather than by rendezvous.
  absl::StatusOr<bool> Deliver(const MessageKey& key, const CallSignature& call,
                               const std::byte* data, uint64_t bytes, bool eager,
                               std::function<void()> on_sent);

  /// The local message of `key` no longer has its source: the RBM copies what it has not
  /// applied yet now, and its on_sent does not run.
  void Detach(const MessageKey& key);

  /// True when the whole message of `key` arrived and waits: a receive posted for it now
  /// completes without anything more from its sender.
  bool Arrived(const MessageKey& key) const;

  /// The posted receive of `key` is given up: its memory is no longer touched and the rest
  /// of its message is discarded as it arrives. True when that holds at once; false when
  /// a segment is landing in its memory right now: then on_complete runs once it is in.
  bool Abandon(const MessageKey& key);

  /// Forgets the messages of `comm` from the ranks in `sources` that have not fully
  /// arrived (posted receives included, whose on_complete will not run) and frees their
  /// buffers: those ranks left, so nothing more of them can arrive.
  void DropUnfinished(const CommId& comm, const std::vector<uint32_t>& sources);

  /// Forgets every posted receive and message of `comm`.
  void Drop(const CommId& comm);

  /// How far the message of `key` has come, for an error about a call that waits for it:
  /// "nothing arrived", "eager, 4096 of 4096 bytes arrived, 0 applied", ...
  std::string Describe(const MessageKey& key) const;

 private:
  enum class Protocol : uint8_t { kNone, kEager, kRendezvous, kLocal };
  enum class Landing : uint8_t { kNone, kDirect, kScratch, kPool };
  static constexpr uint32_t kNoBuffer = ~0u;

  struct Stream {
    Protocol protocol = Protocol::kNone;  ///< kNone until the message is announced
    uint64_t total = 0;
    CallSignature call;    ///< the sender's, once announced
    uint64_t arrived = 0;  ///< bytes landed or delivered: the next expected offset
    uint64_t applied = 0;  ///< bytes written to the posted receive's destination
    bool posted = false;
    RxTarget target;
    uint64_t account = 0;               ///< from a peer: the credit account of its link
    uint32_t buffer = kNoBuffer;        ///< eager: the pool buffer holding it
    const std::byte* source = nullptr;  ///< local rendezvous: where the data is read
    std::vector<std::byte> detached;    ///< local rendezvous whose sender let go: a copy
    std::function<void()> on_sent;      ///< local rendezvous: the source is free
    Landing landing = Landing::kNone;
    std::byte* landing_at = nullptr;
    uint64_t landing_applied = 0;  ///< bytes of the landing segment LandedPart applied
  };
  struct Account {
    uint32_t wanted = 0;      ///< buffers it asked to reserve
    uint32_t reserved = 0;    ///< buffers reserved
    uint32_t granted = 0;     ///< credits the peer holds
    uint32_t returnable = 0;  ///< credits freed and not yet granted again
    uint32_t staged = 0;      ///< its messages now in pool buffers
    uint64_t waiting = 0;     ///< its rendezvous requests whose receive is not posted
    bool queued = false;      ///< in returning_
  };

  absl::Status Mismatch(const MessageKey& key, const std::string& problem) const;
  /// Checks an announced message of `total` bytes of `call` against its posted receive.
  absl::Status CheckFits(const MessageKey& key, uint64_t total, const CallSignature& call,
                         const RxTarget& target) const;
  /// Checks an eager segment against its credits and stream before it lands.
  absl::Status AcceptEager(const MessageKey& key, const Stream& stream,
                           const poe::SegmentHeader& header, uint64_t account) const;
  /// Checks a rendezvous data segment against its stream before it lands.
  absl::Status AcceptData(const MessageKey& key, const Stream& stream,
                          const poe::SegmentHeader& header) const;
  absl::Status Apply(Stream& stream, uint64_t offset, const std::byte* data, uint64_t length);
  /// Applies a local rendezvous message from its source, at once or a piece now and the
  /// rest deferred, and lets the source go once every byte is applied.
  absl::Status ApplyLocal(const MessageKey& key, Stream& stream);
  /// The rendezvous message may come: asks for the clear-to-send.
  void Clear(const MessageKey& key, Stream& stream);
  /// Every byte of the message landed or was delivered.
  static bool AllArrived(const Stream& stream) {
    return stream.protocol != Protocol::kNone && stream.landing == Landing::kNone &&
           stream.arrived == stream.total;
  }
  /// Runs on_complete and forgets the stream once every byte is applied.
  void MaybeComplete(const MessageKey& key);
  /// Forgets the streams for which `drop(key, stream)` holds and frees their buffers.
  void DropIf(const std::function<bool(const MessageKey&, const Stream&)>& drop);
  std::byte* BufferData(uint32_t buffer) { return pool_.get() + uint64_t{buffer} * buffer_bytes_; }
  uint32_t Allocate();
  /// Frees `buffer` (of a message that came on `account`, 0 for none); `credit`: the
  /// message was applied, so its credit returns.
  void Release(uint64_t account, uint32_t buffer, bool credit);
  void Free(uint32_t buffer);
  /// Reserves free buffers that no account claims for the accounts in short_, and grants them.
  void TopUp();
  /// A rendezvous request that came on `account` no longer waits for its receive.
  void StopWaiting(uint64_t account);

  const uint64_t eager_bytes_;
  const uint64_t segment_bytes_;
  const uint64_t max_waiting_;
  const uint32_t local_credits_;
  const uint64_t buffer_bytes_;
  const uint64_t buffer_count_;
  ClearToSendFn clear_to_send_;
  DeferFn defer_;
  uint64_t piece_bytes_ = kWhole;
  std::unique_ptr<std::byte[]> pool_;  ///< untouched until used, so idle pools cost no RAM
  std::vector<uint32_t> free_;
  std::atomic<uint64_t> used_bytes_{0};
  std::atomic<uint64_t> peak_bytes_{0};  ///< written on the engine's thread only
  std::atomic<uint64_t> reserved_bytes_{0};
  /// Free buffers that open accounts may still claim: the sum of reserved - staged.
  /// Invariant: free_.size() >= promised_.
  uint64_t promised_ = 0;
  uint64_t next_account_ = 1;
  absl::flat_hash_map<uint64_t, Account> accounts_;
  std::vector<uint64_t> returning_;  ///< accounts with credits due back (Release)
  /// Open accounts reserving fewer buffers than they want, oldest first. While there is
  /// one, no free buffer is unclaimed.
  std::vector<uint64_t> short_;
  /// Per communicator that sent a local message: its local messages staged (empty ones
  /// too) and not yet applied, at most local_credits_; forgotten with it (Drop).
  absl::flat_hash_map<CommId, uint32_t> local_staged_;
  std::vector<std::byte> bounce_;    ///< local reduce whose source overlaps its result
  absl::node_hash_map<MessageKey, Stream> streams_;  ///< node map: references stay valid
};

/// "message from rank 1 to rank 0 (tag 7, sequence 3)", or "collective message from rank 1
/// to rank 0 (sequence 3)" (kCollectiveTag); the errors that carry it name the communicator.
std::string DescribeMessage(const MessageKey& key);

}  // namespace cclo::hw::emu
