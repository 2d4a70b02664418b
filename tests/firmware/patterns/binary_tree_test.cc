#include "firmware/patterns/binary_tree.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware::patterns {
namespace {

TEST(BinaryTreeTest, HeapLayoutRelativeToTheRoot) {
  // 6 ranks rooted at 0: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5}.
  EXPECT_FALSE(BinaryTreeOf(0, 0, 6).parent.has_value());
  EXPECT_EQ(BinaryTreeOf(0, 0, 6).children, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(BinaryTreeOf(1, 0, 6).children, (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(BinaryTreeOf(2, 0, 6).children, (std::vector<uint32_t>{5}));
  EXPECT_EQ(BinaryTreeOf(5, 0, 6).parent, 2u);
  EXPECT_TRUE(BinaryTreeOf(5, 0, 6).children.empty());
  // The same tree rooted at 4 is shifted by 4 (mod 6): 4 -> {5, 0}, 5 -> {1, 2}, 0 -> {3}.
  EXPECT_FALSE(BinaryTreeOf(4, 4, 6).parent.has_value());
  EXPECT_EQ(BinaryTreeOf(4, 4, 6).children, (std::vector<uint32_t>{5, 0}));
  EXPECT_EQ(BinaryTreeOf(5, 4, 6).children, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(BinaryTreeOf(0, 4, 6).children, (std::vector<uint32_t>{3}));
  EXPECT_EQ(BinaryTreeOf(3, 4, 6).parent, 0u);
}

TEST(BinaryTreeTest, OneRankIsARootWithoutChildren) {
  const BinaryTreeNode alone = BinaryTreeOf(0, 0, 1);
  EXPECT_FALSE(alone.parent.has_value());
  EXPECT_TRUE(alone.children.empty());
}

// Every rank but the root has one parent, which lists it as a child; every rank is reached
// from the root, each exactly once.
TEST(BinaryTreeTest, ParentsAndChildrenAgreeForEverySizeAndRoot) {
  for (uint32_t size = 1; size <= 20; ++size) {
    for (uint32_t root = 0; root < size; ++root) {
      std::vector<int> listed_as_child(size, 0);
      for (uint32_t rank = 0; rank < size; ++rank) {
        const BinaryTreeNode node = BinaryTreeOf(rank, root, size);
        EXPECT_EQ(node.parent.has_value(), rank != root) << size << " ranks, root " << root;
        EXPECT_LE(node.children.size(), 2u);
        if (node.parent) {
          const std::vector<uint32_t> siblings = BinaryTreeOf(*node.parent, root, size).children;
          EXPECT_NE(std::find(siblings.begin(), siblings.end(), rank), siblings.end())
              << size << " ranks, root " << root << ", rank " << rank;
        }
        for (uint32_t child : node.children) {
          ASSERT_LT(child, size);
          ++listed_as_child[child];
          EXPECT_EQ(BinaryTreeOf(child, root, size).parent, rank);
        }
      }
      for (uint32_t rank = 0; rank < size; ++rank) {
        EXPECT_EQ(listed_as_child[rank], rank == root ? 0 : 1)
            << size << " ranks, root " << root << ", rank " << rank;
      }
    }
  }
}

}  // namespace
}  // namespace cclo::firmware::patterns
