#include "firmware/patterns/recursive_doubling.h"

#include <bit>

namespace cclo::firmware::patterns {

uint32_t PowerOfTwoFloor(uint32_t size) { return std::bit_floor(size); }

Fold FoldOf(uint32_t rank, uint32_t size) {
  const uint32_t extra = size - PowerOfTwoFloor(size);
  if (rank >= 2 * extra) return Fold{rank - extra, std::nullopt};
  if (rank % 2 == 0) return Fold{std::nullopt, rank + 1};
  return Fold{rank / 2, rank - 1};
}

uint32_t CoreToRank(uint32_t core_rank, uint32_t size) {
  const uint32_t extra = size - PowerOfTwoFloor(size);
  return core_rank < extra ? 2 * core_rank + 1 : core_rank + extra;
}

uint32_t CorePartner(uint32_t core_rank, uint32_t step, uint32_t size) {
  return CoreToRank(core_rank ^ (uint32_t{1} << step), size);
}

uint32_t DoublingSteps(uint32_t size) {
  return static_cast<uint32_t>(std::countr_zero(PowerOfTwoFloor(size)));
}

}  // namespace cclo::firmware::patterns
