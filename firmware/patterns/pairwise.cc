#include "firmware/patterns/pairwise.h"

#include "firmware/patterns/ring.h"

namespace cclo::firmware::patterns {

uint32_t PairwiseSteps(uint32_t size) { return size - 1; }

uint32_t PairwiseTo(uint32_t rank, uint32_t step, uint32_t size) {
  return RingRank(rank, step, size);
}

uint32_t PairwiseFrom(uint32_t rank, uint32_t step, uint32_t size) {
  return RingRank(rank, -int64_t{step}, size);
}

}  // namespace cclo::firmware::patterns
