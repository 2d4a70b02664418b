#include "firmware/scatter/scatter_tree.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;

hw::CallDescriptor Call(uint32_t rank, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kScatter;
  call.root = 5;
  call.rank = rank;
  call.count = count;
  return call;
}

// Root 5 of 8: its children are relative 4, 2, 1 (ranks 1, 7, 6) with subtrees of ranks
// 1-4, 7 and 0, and 6. The subtree of rank 7 wraps, so it goes through scratch.
TEST(ScatterTreeShapeTest, RootSendsEachSubtreeInOneMessage) {
  absl::StatusOr<hw::Program> program = GenerateScatterTree(Call(5, 2), 8);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "tree");
  EXPECT_EQ(program->scratch_elements, 4u);
  ASSERT_EQ(program->moves.size(), 6u);
  const std::vector<hw::Move>& moves = program->moves;
  EXPECT_EQ(moves[0].op0, Endpoint::Memory(Slot::kOp0, 2));
  EXPECT_EQ(moves[0].result, Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(moves[0].count, 8u);
  EXPECT_EQ(moves[1].op0, Endpoint::Memory(Slot::kOp0, 14));
  EXPECT_EQ(moves[1].result, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(moves[2].op0, Endpoint::Memory(Slot::kOp0, 0));
  EXPECT_EQ(moves[2].result, Endpoint::Memory(Slot::kScratch, 2));
  EXPECT_EQ(moves[3].op0, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(moves[3].result, Endpoint::Network(7, hw::kCollectiveTag));
  EXPECT_EQ(moves[3].count, 4u);
  EXPECT_EQ(moves[3].deps, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(moves[4].op0, Endpoint::Memory(Slot::kOp0, 12));
  EXPECT_EQ(moves[4].result, Endpoint::Network(6, hw::kCollectiveTag));
  EXPECT_EQ(moves[5].op0, Endpoint::Memory(Slot::kOp0, 10));
  EXPECT_EQ(moves[5].result, Endpoint::Memory(Slot::kResult, 0));
}

// Rank 1 (relative 4) gets the chunks of ranks 1-4 and passes on those of ranks 3-4 and 2.
TEST(ScatterTreeShapeTest, InnerRankForwardsPartsOfItsSubtree) {
  absl::StatusOr<hw::Program> program = GenerateScatterTree(Call(1, 2), 8);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->scratch_elements, 8u);
  ASSERT_EQ(program->moves.size(), 4u);
  const std::vector<hw::Move>& moves = program->moves;
  EXPECT_EQ(moves[0].op0, Endpoint::Network(5, hw::kCollectiveTag));
  EXPECT_EQ(moves[0].result, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(moves[0].count, 8u);
  EXPECT_EQ(moves[1].op0, Endpoint::Memory(Slot::kScratch, 4));
  EXPECT_EQ(moves[1].result, Endpoint::Network(3, hw::kCollectiveTag));
  EXPECT_EQ(moves[1].count, 4u);
  EXPECT_EQ(moves[2].op0, Endpoint::Memory(Slot::kScratch, 2));
  EXPECT_EQ(moves[2].result, Endpoint::Network(2, hw::kCollectiveTag));
  EXPECT_EQ(moves[3].op0, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(moves[3].result, Endpoint::Memory(Slot::kResult, 0));
  for (int i = 1; i < 4; ++i) EXPECT_EQ(moves[i].deps, std::vector<uint32_t>{0});
}

TEST(ScatterTreeShapeTest, LeafReceivesItsChunkAndInPlaceRootReadsResult) {
  absl::StatusOr<hw::Program> program = GenerateScatterTree(Call(2, 2), 8);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 1u);
  EXPECT_EQ(program->moves[0].op0, Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[0].result, Endpoint::Memory(Slot::kResult, 0));
  hw::CallDescriptor call = Call(5, 2);
  call.in_place = true;
  program = GenerateScatterTree(call, 8);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 5u);
  EXPECT_EQ(program->moves[0].op0, Endpoint::Memory(Slot::kResult, 2));
  EXPECT_TRUE(GenerateScatterTree(Call(1, 0), 8)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
