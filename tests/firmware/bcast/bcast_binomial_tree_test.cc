#include "firmware/bcast/bcast_binomial_tree.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;

hw::CallDescriptor Call(uint32_t rank, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kBcast;
  call.root = 2;
  call.rank = rank;
  call.count = count;
  return call;
}

// Root 2 of 5: relative ranks 2, 4, 1 (ranks 4, 1, 3) are the root's children, largest
// subtree first (relative 2 heads {2, 3}); relative 2 (rank 4) forwards to relative 3
// (rank 0).
TEST(BcastBinomialTreeShapeTest, RootSendsToChildrenLargestSubtreeFirst) {
  absl::StatusOr<hw::Program> program = GenerateBcastBinomialTree(Call(2, 9), 5);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "binomial_tree");
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 3u);
  const std::vector<uint32_t> children = {4, 1, 3};
  for (size_t i = 0; i < children.size(); ++i) {
    EXPECT_EQ(program->moves[i].op0, Endpoint::Memory(hw::Slot::kResult, 0));
    EXPECT_EQ(program->moves[i].result, Endpoint::Network(children[i], hw::kCollectiveTag));
    EXPECT_EQ(program->moves[i].count, 9u);
    EXPECT_TRUE(program->moves[i].deps.empty());
  }
}

TEST(BcastBinomialTreeShapeTest, InnerRankReceivesThenForwards) {
  absl::StatusOr<hw::Program> program = GenerateBcastBinomialTree(Call(4, 9), 5);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 2u);
  EXPECT_EQ(program->moves[0].op0, Endpoint::Network(2, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[0].result, Endpoint::Memory(hw::Slot::kResult, 0));
  EXPECT_EQ(program->moves[1].result, Endpoint::Network(0, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[1].deps, std::vector<uint32_t>{0});
  program = GenerateBcastBinomialTree(Call(3, 9), 5);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 1u);
  EXPECT_EQ(program->moves[0].op0, Endpoint::Network(2, hw::kCollectiveTag));
}

TEST(BcastBinomialTreeShapeTest, AppendUsesTheGivenSlotAndCountZeroIsEmpty) {
  ProgramBuilder builder("test");
  AppendBcastBinomialTree(builder, 1, 4, 0, hw::Slot::kOp1, 6);
  const hw::Program program = std::move(builder).Finish();
  ASSERT_EQ(program.moves.size(), 1u);
  EXPECT_EQ(program.moves[0].result, Endpoint::Memory(hw::Slot::kOp1, 0));
  EXPECT_EQ(program.moves[0].count, 6u);
  EXPECT_TRUE(GenerateBcastBinomialTree(Call(2, 0), 5)->moves.empty());
  hw::CallDescriptor alone = Call(0, 9);
  alone.root = 0;
  EXPECT_TRUE(GenerateBcastBinomialTree(alone, 1)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
