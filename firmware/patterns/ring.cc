#include "firmware/patterns/ring.h"

#include <algorithm>

namespace cclo::firmware::patterns {

uint32_t RingRank(uint32_t rank, int64_t shift, uint32_t size) {
  const int64_t ring = size;
  const int64_t moved = (static_cast<int64_t>(rank) + shift % ring + ring) % ring;
  return static_cast<uint32_t>(moved);
}

Chunk RingChunk(uint64_t count, uint32_t parts, uint32_t index) {
  const uint64_t base = count / parts;
  const uint64_t extra = count % parts;
  return Chunk{index * base + std::min<uint64_t>(index, extra), base + (index < extra ? 1 : 0)};
}

}  // namespace cclo::firmware::patterns
