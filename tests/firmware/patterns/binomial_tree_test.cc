#include "firmware/patterns/binomial_tree.h"

#include <algorithm>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cclo::firmware::patterns {
namespace {

using ::testing::ElementsAre;

TEST(BinomialTreeTest, RelativeRanksWrapAroundTheRoot) {
  EXPECT_EQ(ToRelative(5, 5, 8), 0u);
  EXPECT_EQ(ToRelative(1, 5, 8), 4u);
  EXPECT_EQ(ToRelative(7, 5, 8), 2u);
  EXPECT_EQ(ToReal(4, 5, 8), 1u);
  EXPECT_EQ(ToReal(2, 5, 8), 7u);
  EXPECT_EQ(ToReal(0, 0, 1), 0u);
}

TEST(BinomialTreeTest, ThirteenRanksFromRankZero) {
  EXPECT_FALSE(BinomialParent(0, 0, 13).has_value());
  EXPECT_THAT(BinomialChildren(0, 0, 13), ElementsAre(8, 4, 2, 1));
  EXPECT_THAT(BinomialChildren(4, 0, 13), ElementsAre(6, 5));
  // Rank 12's subtree is cut short at 13 ranks, so rank 10's goes first.
  EXPECT_THAT(BinomialChildren(8, 0, 13), ElementsAre(10, 12, 9));
  EXPECT_THAT(BinomialChildren(0, 0, 9), ElementsAre(4, 2, 8, 1));
  EXPECT_THAT(BinomialChildren(12, 0, 13), ElementsAre());
  EXPECT_EQ(BinomialParent(11, 0, 13), 10u);
  EXPECT_EQ(BinomialParent(12, 0, 13), 8u);
  EXPECT_EQ(BinomialSubtree(0, 0, 13), (RelativeRange{0, 13}));
  EXPECT_EQ(BinomialSubtree(8, 0, 13), (RelativeRange{8, 13}));
  EXPECT_EQ(BinomialSubtree(4, 0, 13), (RelativeRange{4, 8}));
  EXPECT_EQ(BinomialSubtree(7, 0, 13).size(), 1u);
}

TEST(BinomialTreeTest, OtherRootsShiftTheTree) {
  // Root 5 of 8: rank 1 is relative 4, whose children are relative 6 and 5.
  EXPECT_EQ(BinomialParent(1, 5, 8), 5u);
  EXPECT_THAT(BinomialChildren(1, 5, 8), ElementsAre(3, 2));
  EXPECT_EQ(BinomialSubtree(1, 5, 8), (RelativeRange{4, 8}));
  EXPECT_THAT(BinomialChildren(5, 5, 8), ElementsAre(1, 7, 6));
  EXPECT_THAT(BinomialChildren(0, 0, 1), ElementsAre());
}

TEST(BinomialTreeTest, RealRangesSplitWhereTheyWrap) {
  EXPECT_THAT(ToRealRanges({1, 3}, 5, 8), ElementsAre(RankRange{6, 8}));
  EXPECT_THAT(ToRealRanges({4, 8}, 5, 8), ElementsAre(RankRange{1, 5}));
  EXPECT_THAT(ToRealRanges({2, 6}, 5, 8), ElementsAre(RankRange{7, 8}, RankRange{0, 3}));
  EXPECT_THAT(ToRealRanges({0, 8}, 0, 8), ElementsAre(RankRange{0, 8}));
  EXPECT_THAT(ToRealRanges({3, 3}, 5, 8), ElementsAre());
}

// For every size and root: the parent lists the rank among its children, a subtree is the
// rank followed by its children's subtrees, sizes never grow along the sending order, and
// the root's subtree is everything.
TEST(BinomialTreeTest, ParentsChildrenAndSubtreesAgree) {
  for (uint32_t size = 1; size <= 40; ++size) {
    for (uint32_t root = 0; root < size; ++root) {
      EXPECT_EQ(BinomialSubtree(root, root, size), (RelativeRange{0, size}));
      for (uint32_t rank = 0; rank < size; ++rank) {
        if (rank != root) {
          const std::optional<uint32_t> parent = BinomialParent(rank, root, size);
          ASSERT_TRUE(parent.has_value()) << size << " ranks, root " << root << ", rank " << rank;
          EXPECT_THAT(BinomialChildren(*parent, root, size), ::testing::Contains(rank));
        }
        const RelativeRange subtree = BinomialSubtree(rank, root, size);
        EXPECT_EQ(subtree.begin, ToRelative(rank, root, size));
        const std::vector<uint32_t> children = BinomialChildren(rank, root, size);
        std::vector<RelativeRange> below;
        for (uint32_t child : children) {
          EXPECT_EQ(BinomialParent(child, root, size), rank);
          below.push_back(BinomialSubtree(child, root, size));
        }
        std::sort(below.begin(), below.end(),
                  [](const RelativeRange& a, const RelativeRange& b) { return a.begin < b.begin; });
        uint32_t next = subtree.begin + 1;
        for (const RelativeRange& range : below) {
          EXPECT_EQ(range.begin, next) << size << " ranks, root " << root << ", rank " << rank;
          next = range.end;
        }
        EXPECT_EQ(next, subtree.end) << size << " ranks, root " << root << ", rank " << rank;
        uint32_t previous_size = size;
        for (uint32_t child : children) {
          const uint32_t child_size = BinomialSubtree(child, root, size).size();
          EXPECT_LE(child_size, previous_size);
          previous_size = child_size;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cclo::firmware::patterns
