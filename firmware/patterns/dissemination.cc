#include "firmware/patterns/dissemination.h"

#include <bit>

#include "firmware/patterns/ring.h"

namespace cclo::firmware::patterns {

uint32_t DisseminationRounds(uint32_t size) {
  return static_cast<uint32_t>(std::bit_width(size - 1));
}

uint32_t DisseminationTo(uint32_t rank, uint32_t round, uint32_t size) {
  return RingRank(rank, int64_t{1} << round, size);
}

uint32_t DisseminationFrom(uint32_t rank, uint32_t round, uint32_t size) {
  return RingRank(rank, -(int64_t{1} << round), size);
}

}  // namespace cclo::firmware::patterns
