// The segment header that starts every message segment on a data session (DESIGN 7).
//
// Fixed 64-byte little-endian layout, version 7 (2 carried both directions on one session
// per pair of engines; 3 has one session each way, hw/poe/handshake.h; 4 adds the HEARTBEAT
// control message; 5 the call signature; 6 the DEPART control message and BYE's word on
// whether the sender's ranks left or it broke the communicator; 7 the algorithm in the
// call signature):
//
//   offset  size  field
//        0     4  magic        "CCLO" (0x4F4C4343)
//        4     1  version      kWireVersion
//        5     1  type         SegmentType
//        6     2  reserved     must be 0
//        8    16  comm         communicator id
//       24     4  src          sending rank of the message
//       28     4  dst          receiving rank of the message
//       32     4  tag          message tag
//       36     4  length       payload bytes that follow this header
//       40     8  sequence     per (comm, src, dst, tag) message number
//       48     8  offset       where this segment's payload starts in the message
//                              (eager, rendezvous request: the call signature instead)
//       56     8  total        bytes of the whole message (credit: credits granted)
//
// The call signature (hw::CallSignature) of the sender's call, in the first segment of
// each message, where the offset is 0 anyway: at 48 the collective, 49 the datatype, 50
// the reduce op, 51 the algorithm's place in its collective's table (1 byte each), 52 the
// root (4 bytes), as hw::Canonical makes it: a field the collective does not use is 0,
// point-to-point is send, and never nop, which sends nothing.
//
// Segment types and what each must carry (anything else is rejected by Decode):
//
//   type                  direction           payload        offset  total
//   1 eager data          sender -> receiver  whole message  0       = length
//   2 control             either              1..1024 bytes  0       = length
//   3 rendezvous request  sender -> receiver  none           0       message bytes
//   4 clear-to-send       receiver -> sender  none           0       message bytes
//   5 rendezvous data     sender -> receiver  1+ bytes       any     message bytes
//   6 credit              receiver -> sender  none           0       credits, 0..kMaxCredits
//
// Control and credit segments carry src, dst, tag and sequence 0; the others name the
// message (a clear-to-send the one it clears, so its src is the rank it goes to). Decode
// checks everything that can be checked without knowing the communicator; the receiver
// checks the rest (ranks, credits, the call's root, tag and algorithm's place in its
// collective's table, the posted receive) before it touches memory.
//
// Every version keeps the magic, the version, the communicator and the layout of control
// segments where they are, and the REFUSE message as it is (versions 1 to 7 all do), so that
// an engine can read the HELLO of a peer of another version far enough to refuse it in a
// segment that peer reads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "hw/types.h"

namespace cclo::hw::poe {

inline constexpr uint32_t kMagic = 0x4F4C4343;
inline constexpr uint8_t kWireVersion = 7;
inline constexpr size_t kHeaderBytes = 64;
/// Largest payload one segment may carry.
inline constexpr uint32_t kMaxSegmentBytes = 16u << 20;
/// Smallest segment size an engine may configure (and announce in its handshake).
inline constexpr uint32_t kMinSegmentBytes = 4096;
/// Largest payload of a control segment (handshake and session messages).
inline constexpr uint32_t kMaxControlBytes = 1024;
/// Most eager credits one end of a session may hold, and so grant in one credit segment.
inline constexpr uint64_t kMaxCredits = 65536;

/// What a segment carries; see the table above.
enum class SegmentType : uint8_t {
  kEagerData = 1,       ///< a whole message, sent on an eager credit
  kControl = 2,         ///< a session message (handshake, close); see hw/poe/handshake.h
  kRequest = 3,         ///< rendezvous request (RTS): the sender has a message of `total` bytes
  kClearToSend = 4,     ///< the receive of that message is posted: send its data
  kRendezvousData = 5,  ///< a piece of a message whose clear-to-send was sent
  kCredit = 6,          ///< grants `total` eager credits of the communicator (first: maybe 0)
};

struct SegmentHeader {
  SegmentType type = SegmentType::kEagerData;
  CommId comm{};
  uint32_t src = 0;
  uint32_t dst = 0;
  uint32_t tag = 0;
  uint32_t length = 0;
  uint64_t sequence = 0;
  uint64_t offset = 0;
  uint64_t total = 0;
  CallSignature call;  ///< eager data and rendezvous requests only; see above

  bool operator==(const SegmentHeader&) const = default;
};

using EncodedHeader = std::array<std::byte, kHeaderBytes>;

/// Encodes `header` in the layout above, as a segment of `version`: another version only for
/// a control segment, which every version lays out alike.
EncodedHeader Encode(const SegmentHeader& header, uint8_t version = kWireVersion);

/// Decodes and validates the first kHeaderBytes of `data`. Fails with INVALID_ARGUMENT
/// naming the bad field and its value.
absl::StatusOr<SegmentHeader> Decode(const std::byte* data, size_t size);

/// A control segment of another wire version, as Decode would take it in this one.
struct ForeignHeader {
  uint8_t version = 0;
  SegmentHeader header;
};

/// The first kHeaderBytes of `data` as a valid control segment of a version other than
/// kWireVersion (which Decode refuses), or nothing if they are not one.
std::optional<ForeignHeader> DecodeForeign(const std::byte* data, size_t size);

/// Lower-case name of a segment type ("eager", "rendezvous request", ...).
std::string SegmentTypeName(SegmentType type);

/// "eager src=1 dst=0 tag=7 seq=3 [0, 4096) of 4096 comm=ab12... call=allreduce of float32
/// (sum)" for logs and errors.
std::string Describe(const SegmentHeader& header);

}  // namespace cclo::hw::poe
