// The segment header that starts every message segment on a data session (DESIGN 7).
//
// Fixed 64-byte little-endian layout, version 1:
//
//   offset  size  field
//        0     4  magic        "CCLO" (0x4F4C4343)
//        4     1  version      kWireVersion
//        5     1  type         SegmentType
//        6     2  reserved     must be 0
//        8    16  comm         communicator id
//       24     4  src          sending rank
//       28     4  dst          receiving rank
//       32     4  tag          message tag
//       36     4  length       payload bytes that follow this header
//       40     8  sequence     per (comm, src, dst, tag) message number
//       48     8  offset       where this segment's payload starts in the message
//       56     8  total        bytes of the whole message
//
// Decode checks everything that can be checked without knowing the communicator; the
// receiver checks the rest (ranks, lengths against the posted receive) before it touches
// memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "hw/types.h"

namespace cclo::hw::poe {

inline constexpr uint32_t kMagic = 0x4F4C4343;
inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kHeaderBytes = 64;
/// Largest payload one segment may carry.
inline constexpr uint32_t kMaxSegmentBytes = 16u << 20;
/// Smallest segment size an engine may configure (and announce in its handshake).
inline constexpr uint32_t kMinSegmentBytes = 4096;
/// Largest payload of a control segment (handshake and session messages).
inline constexpr uint32_t kMaxControlBytes = 1024;

/// What a segment carries. Values 3-6 are reserved for the rendezvous protocol
/// (request, clear-to-send, data, done) and are rejected by version 1.
enum class SegmentType : uint8_t {
  kEagerData = 1,  ///< a piece of a message, matched by (comm, src, dst, tag, sequence)
  kControl = 2,    ///< a session message (handshake, close); see hw/poe/handshake.h
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

  bool operator==(const SegmentHeader&) const = default;
};

using EncodedHeader = std::array<std::byte, kHeaderBytes>;

/// Encodes `header` in the version-1 layout.
EncodedHeader Encode(const SegmentHeader& header);

/// Decodes and validates the first kHeaderBytes of `data`. Fails with INVALID_ARGUMENT
/// naming the bad field and its value.
absl::StatusOr<SegmentHeader> Decode(const std::byte* data, size_t size);

/// "eager src=1 dst=0 tag=7 seq=3 [0, 4096) of 8192 comm=ab12..." for logs and errors.
std::string Describe(const SegmentHeader& header);

}  // namespace cclo::hw::poe
