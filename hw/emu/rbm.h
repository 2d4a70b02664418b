// The rx-buffer manager (RBM): matches arriving message segments to posted receives by
// (communicator, src, dst, tag, sequence) and owns the eager rx buffer pool.
//
// An arriving segment whose receive is posted goes straight to its destination: a copy
// receive lands in the result buffer itself; a reduce receive lands in the caller's
// one-segment scratch and is reduced at once with the memory operand's same element range
// into the result. A segment that arrives before its receive is staged in a pool buffer
// (the pool is rx_pool_bytes cut into segment-sized buffers) and applied when the receive
// is posted. An empty pool answers "no room": the caller stops reading that source until
// a buffer is freed (on_space). Segments of one message must arrive in order, all naming
// the same total, and must fit the posted receive. When a source rank leaves, its
// unfinished messages are dropped; its whole staged ones stay for later receives. Cost:
// one copy for staged segments, none for posted ones; O(1) hash lookups per segment.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
  /// A pool of pool_bytes / buffer_bytes buffers; `on_space` runs whenever one is freed.
  Rbm(uint64_t pool_bytes, uint64_t buffer_bytes, std::function<void()> on_space);

  uint64_t buffer_bytes() const { return buffer_bytes_; }
  uint64_t pool_bytes() const { return buffer_count_ * buffer_bytes_; }
  /// Thread-safe.
  uint64_t used_bytes() const { return used_bytes_.load(); }

  /// Posts a receive and applies what was staged for it; on_complete may run inside.
  absl::Status Post(const MessageKey& key, RxTarget target);

  /// Where the payload of an arriving segment goes: the destination, `scratch` (room for
  /// buffer_bytes), or a pool buffer; nullptr when it must wait for a free buffer (ask
  /// again later). Errors name what does not match.
  absl::StatusOr<std::byte*> Land(const poe::SegmentHeader& header, std::byte* scratch);

  /// The payload of the segment last given a place by Land is there: apply or stage it.
  absl::Status Landed(const poe::SegmentHeader& header);

  /// A segment from a rank on this engine, read from `data`: applied at once if its
  /// receive is posted, else staged; false when it must wait for a free buffer.
  absl::StatusOr<bool> Deliver(const poe::SegmentHeader& header, const std::byte* data);

  /// True when the whole message of `key` is staged: a receive posted for it now
  /// completes without anything more arriving.
  bool Arrived(const MessageKey& key) const;

  /// The posted receive of `key` is given up: its memory is no longer touched and the rest
  /// of its message is discarded as it arrives. True when that holds at once; false when
  /// a segment is landing in its memory right now: then on_complete runs once it is in.
  bool Abandon(const MessageKey& key);

  /// Forgets the messages of `comm` from the ranks in `sources` that have not fully
  /// arrived (posted receives included, whose on_complete will not run) and frees their
  /// buffers: those ranks left, so nothing more of them can arrive.
  void DropUnfinished(const CommId& comm, const std::vector<uint32_t>& sources);

  /// Forgets every posted receive and staged segment of `comm`.
  void Drop(const CommId& comm);

 private:
  enum class Landing { kNone, kDirect, kScratch, kPool, kEmpty };
  static constexpr uint32_t kNoBuffer = ~0u;

  struct Staged {
    uint32_t buffer;  ///< kNoBuffer for an empty segment
    uint64_t offset;
    uint64_t length;
  };
  struct Stream {
    bool seen = false;  ///< a segment arrived, so `total` is known
    uint64_t total = 0;
    uint64_t arrived = 0;  ///< bytes landed or delivered: the next expected offset
    uint64_t applied = 0;  ///< bytes written to the posted receive's destination
    bool posted = false;
    RxTarget target;
    std::deque<Staged> staged;
    Landing landing = Landing::kNone;
    std::byte* landing_at = nullptr;
    uint32_t landing_buffer = kNoBuffer;
  };

  /// Checks `header` against what the stream knows; records the total of a first segment.
  absl::Status Accept(const MessageKey& key, Stream& stream, const poe::SegmentHeader& header);
  absl::Status Apply(Stream& stream, uint64_t offset, const std::byte* data, uint64_t length);
  /// Every byte of the message landed or was delivered.
  static bool AllArrived(const Stream& stream) {
    return stream.seen && stream.landing == Landing::kNone && stream.arrived == stream.total;
  }
  /// Runs on_complete and forgets the stream once every byte is applied.
  void MaybeComplete(const MessageKey& key);
  /// Forgets the streams for which `drop(key, stream)` holds and frees their buffers.
  void DropIf(const std::function<bool(const MessageKey&, const Stream&)>& drop);
  std::byte* BufferData(uint32_t buffer) { return pool_.get() + uint64_t{buffer} * buffer_bytes_; }
  uint32_t Allocate();
  void Free(uint32_t buffer);

  const uint64_t buffer_bytes_;
  const uint64_t buffer_count_;
  std::function<void()> on_space_;
  std::unique_ptr<std::byte[]> pool_;  ///< untouched until used, so idle pools cost no RAM
  std::vector<uint32_t> free_;
  std::atomic<uint64_t> used_bytes_{0};
  std::vector<std::byte> bounce_;  ///< local reduce whose source overlaps its result
  absl::node_hash_map<MessageKey, Stream> streams_;  ///< node map: references stay valid
};

/// "message from rank 1 to rank 0 (tag 7, sequence 3) of communicator ab12..."
std::string DescribeMessage(const MessageKey& key);

}  // namespace cclo::hw::emu
