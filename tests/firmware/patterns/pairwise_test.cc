#include "firmware/patterns/pairwise.h"

#include <set>
#include <utility>

#include "gtest/gtest.h"

namespace cclo::firmware::patterns {
namespace {

TEST(PairwiseTest, PeersOfOneStep) {
  EXPECT_EQ(PairwiseSteps(1), 0u);
  EXPECT_EQ(PairwiseSteps(5), 4u);
  EXPECT_EQ(PairwiseTo(3, 1, 5), 4u);
  EXPECT_EQ(PairwiseTo(3, 2, 5), 0u);
  EXPECT_EQ(PairwiseFrom(3, 4, 5), 4u);
  EXPECT_EQ(PairwiseFrom(0, 1, 5), 4u);
}

// Every step is a permutation whose sender and receiver agree, and over all steps every
// ordered pair of distinct ranks exchanges exactly once.
TEST(PairwiseTest, EveryPairExactlyOnce) {
  for (uint32_t size = 1; size <= 13; ++size) {
    std::set<std::pair<uint32_t, uint32_t>> pairs;
    for (uint32_t step = 1; step <= PairwiseSteps(size); ++step) {
      std::set<uint32_t> destinations;
      for (uint32_t rank = 0; rank < size; ++rank) {
        const uint32_t to = PairwiseTo(rank, step, size);
        ASSERT_LT(to, size);
        EXPECT_NE(to, rank) << size << " ranks, step " << step;
        EXPECT_EQ(PairwiseFrom(to, step, size), rank) << size << " ranks, step " << step;
        destinations.insert(to);
        EXPECT_TRUE(pairs.insert({rank, to}).second) << size << " ranks, step " << step;
      }
      EXPECT_EQ(destinations.size(), size);
    }
    EXPECT_EQ(pairs.size(), size * (size - 1));
  }
}

}  // namespace
}  // namespace cclo::firmware::patterns
