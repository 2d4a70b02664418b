// Rank arithmetic of a ring: rank r sends to r+1 and receives from r-1 (mod size), and a
// buffer of `count` elements is cut into `size` chunks that differ by at most one element.
#pragma once

#include <cstdint>

namespace cclo::firmware::patterns {

/// The rank `shift` places to the right of `rank` on a ring of `size` ranks (negative
/// `shift` goes left). `size` must be at least 1.
uint32_t RingRank(uint32_t rank, int64_t shift, uint32_t size);

/// The rank this one sends to.
inline uint32_t RingRight(uint32_t rank, uint32_t size) { return RingRank(rank, 1, size); }
/// The rank this one receives from.
inline uint32_t RingLeft(uint32_t rank, uint32_t size) { return RingRank(rank, -1, size); }

/// A contiguous run of elements.
struct Chunk {
  uint64_t offset = 0;  ///< first element
  uint64_t count = 0;   ///< number of elements, possibly 0
  bool operator==(const Chunk&) const = default;
};

/// Chunk `index` of `count` elements cut into `parts` chunks: count/parts elements, plus
/// one for the first count%parts chunks. `parts` must be at least 1 and `index` < parts.
Chunk RingChunk(uint64_t count, uint32_t parts, uint32_t index);

}  // namespace cclo::firmware::patterns
