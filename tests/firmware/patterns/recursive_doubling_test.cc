#include "firmware/patterns/recursive_doubling.h"

#include <set>

#include "gtest/gtest.h"

namespace cclo::firmware::patterns {
namespace {

TEST(RecursiveDoublingTest, PowerOfTwoFloorAndSteps) {
  EXPECT_EQ(PowerOfTwoFloor(1), 1u);
  EXPECT_EQ(PowerOfTwoFloor(5), 4u);
  EXPECT_EQ(PowerOfTwoFloor(8), 8u);
  EXPECT_EQ(PowerOfTwoFloor(13), 8u);
  EXPECT_EQ(DoublingSteps(1), 0u);
  EXPECT_EQ(DoublingSteps(13), 3u);
  EXPECT_EQ(DoublingSteps(16), 4u);
}

TEST(RecursiveDoublingTest, FoldPairsTheFirstRanksAndNumbersTheCore) {
  // 6 ranks: p = 4, extra = 2. Pairs (0,1) and (2,3); core = 1, 3, 4, 5.
  EXPECT_FALSE(FoldOf(0, 6).core_rank.has_value());
  EXPECT_EQ(FoldOf(0, 6).pair, 1u);
  EXPECT_EQ(FoldOf(1, 6).core_rank, 0u);
  EXPECT_EQ(FoldOf(1, 6).pair, 0u);
  EXPECT_EQ(FoldOf(3, 6).core_rank, 1u);
  EXPECT_EQ(FoldOf(4, 6).core_rank, 2u);
  EXPECT_FALSE(FoldOf(4, 6).pair.has_value());
  EXPECT_EQ(FoldOf(5, 6).core_rank, 3u);
}

TEST(RecursiveDoublingTest, CoreRanksMapBackAndPartnersAreMutual) {
  for (uint32_t size = 1; size <= 20; ++size) {
    const uint32_t p = PowerOfTwoFloor(size);
    std::set<uint32_t> seen;
    for (uint32_t core = 0; core < p; ++core) {
      const uint32_t rank = CoreToRank(core, size);
      ASSERT_LT(rank, size);
      EXPECT_EQ(FoldOf(rank, size).core_rank, core) << size << " ranks, core " << core;
      seen.insert(rank);
      for (uint32_t step = 0; step < DoublingSteps(size); ++step) {
        const uint32_t partner = CorePartner(core, step, size);
        EXPECT_EQ(CorePartner(*FoldOf(partner, size).core_rank, step, size), rank);
      }
    }
    EXPECT_EQ(seen.size(), p);
  }
}

}  // namespace
}  // namespace cclo::firmware::patterns
