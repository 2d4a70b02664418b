#include "firmware/patterns/dissemination.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware::patterns {
namespace {

TEST(DisseminationTest, RoundsAreCeilLog2) {
  EXPECT_EQ(DisseminationRounds(1), 0u);
  EXPECT_EQ(DisseminationRounds(2), 1u);
  EXPECT_EQ(DisseminationRounds(3), 2u);
  EXPECT_EQ(DisseminationRounds(4), 2u);
  EXPECT_EQ(DisseminationRounds(5), 3u);
  EXPECT_EQ(DisseminationRounds(8), 3u);
  EXPECT_EQ(DisseminationRounds(13), 4u);
}

TEST(DisseminationTest, PeersAreTwoToTheRoundAway) {
  EXPECT_EQ(DisseminationTo(0, 0, 5), 1u);
  EXPECT_EQ(DisseminationTo(3, 2, 5), 2u);
  EXPECT_EQ(DisseminationFrom(0, 2, 5), 1u);
  EXPECT_EQ(DisseminationFrom(4, 1, 5), 2u);
  for (uint32_t size = 2; size <= 13; ++size) {
    for (uint32_t round = 0; round < DisseminationRounds(size); ++round) {
      for (uint32_t rank = 0; rank < size; ++rank) {
        EXPECT_NE(DisseminationTo(rank, round, size), rank);
        EXPECT_EQ(DisseminationFrom(DisseminationTo(rank, round, size), round, size), rank);
      }
    }
  }
}

// What each rank has heard of, passed on round by round: everyone after the last round, and
// (for two or more ranks) not everyone one round earlier.
TEST(DisseminationTest, EveryRankHearsOfEveryRankInTheLastRound) {
  for (uint32_t size = 1; size <= 20; ++size) {
    std::vector<std::vector<bool>> heard(size, std::vector<bool>(size, false));
    for (uint32_t rank = 0; rank < size; ++rank) heard[rank][rank] = true;
    auto everyone = [&] {
      for (const std::vector<bool>& row : heard) {
        for (bool known : row) {
          if (!known) return false;
        }
      }
      return true;
    };
    for (uint32_t round = 0; round < DisseminationRounds(size); ++round) {
      EXPECT_FALSE(everyone()) << size << " ranks, before round " << round;
      std::vector<std::vector<bool>> next = heard;
      for (uint32_t rank = 0; rank < size; ++rank) {
        const uint32_t from = DisseminationFrom(rank, round, size);
        for (uint32_t other = 0; other < size; ++other) {
          next[rank][other] = next[rank][other] || heard[from][other];
        }
      }
      heard = next;
    }
    EXPECT_TRUE(everyone()) << size << " ranks";
  }
}

}  // namespace
}  // namespace cclo::firmware::patterns
