#include "firmware/gather/gather_tree.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;

hw::CallDescriptor Call(uint32_t rank, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kGather;
  call.root = 5;
  call.rank = rank;
  call.count = count;
  return call;
}

// Root 5 of 8: its children are relative 4, 2, 1 (ranks 1, 7, 6) with subtrees of ranks
// 1-4, 7 and 0, and 6. The subtree of rank 7 wraps, so it arrives in scratch and is put in
// place after the other receives.
TEST(GatherTreeShapeTest, RootReceivesEachSubtreeInOneMessage) {
  absl::StatusOr<hw::Program> program = GenerateGatherTree(Call(5, 2), 8);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "tree");
  EXPECT_EQ(program->scratch_elements, 4u);
  ASSERT_EQ(program->moves.size(), 6u);
  const std::vector<hw::Move>& moves = program->moves;
  EXPECT_EQ(moves[0].op0, Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(moves[0].result, Endpoint::Memory(Slot::kResult, 2));
  EXPECT_EQ(moves[0].count, 8u);
  EXPECT_EQ(moves[1].op0, Endpoint::Network(7, hw::kCollectiveTag));
  EXPECT_EQ(moves[1].result, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(moves[1].count, 4u);
  EXPECT_EQ(moves[2].op0, Endpoint::Network(6, hw::kCollectiveTag));
  EXPECT_EQ(moves[2].result, Endpoint::Memory(Slot::kResult, 12));
  EXPECT_EQ(moves[3].op0, Endpoint::Memory(Slot::kOp0, 0));
  EXPECT_EQ(moves[3].result, Endpoint::Memory(Slot::kResult, 10));
  EXPECT_EQ(moves[4].op0, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(moves[4].result, Endpoint::Memory(Slot::kResult, 14));
  EXPECT_EQ(moves[5].op0, Endpoint::Memory(Slot::kScratch, 2));
  EXPECT_EQ(moves[5].result, Endpoint::Memory(Slot::kResult, 0));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(moves[i].deps.empty()) << i;
  EXPECT_EQ(moves[4].deps, std::vector<uint32_t>{1});
  EXPECT_EQ(moves[5].deps, std::vector<uint32_t>{1});
}

// Rank 1 (relative 4) collects the chunks of ranks 1-4 and sends them up in one message.
TEST(GatherTreeShapeTest, InnerRankSendsItsWholeSubtreeOnce) {
  absl::StatusOr<hw::Program> program = GenerateGatherTree(Call(1, 2), 8);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->scratch_elements, 8u);
  ASSERT_EQ(program->moves.size(), 4u);
  const std::vector<hw::Move>& moves = program->moves;
  EXPECT_EQ(moves[0].op0, Endpoint::Memory(Slot::kOp0, 0));
  EXPECT_EQ(moves[0].result, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(moves[1].op0, Endpoint::Network(3, hw::kCollectiveTag));
  EXPECT_EQ(moves[1].result, Endpoint::Memory(Slot::kScratch, 4));
  EXPECT_EQ(moves[1].count, 4u);
  EXPECT_EQ(moves[2].op0, Endpoint::Network(2, hw::kCollectiveTag));
  EXPECT_EQ(moves[2].result, Endpoint::Memory(Slot::kScratch, 2));
  EXPECT_EQ(moves[3].op0, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(moves[3].result, Endpoint::Network(5, hw::kCollectiveTag));
  EXPECT_EQ(moves[3].count, 8u);
  EXPECT_EQ(moves[3].deps, (std::vector<uint32_t>{0, 1, 2}));
}

TEST(GatherTreeShapeTest, LeafSendsItsInputAndInPlaceRootCopiesNothingOfItsOwn) {
  absl::StatusOr<hw::Program> program = GenerateGatherTree(Call(2, 2), 8);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 1u);
  EXPECT_EQ(program->moves[0].op0, Endpoint::Memory(Slot::kOp0, 0));
  EXPECT_EQ(program->moves[0].result, Endpoint::Network(1, hw::kCollectiveTag));
  hw::CallDescriptor call = Call(5, 2);
  call.in_place = true;
  program = GenerateGatherTree(call, 8);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 5u);
  for (const hw::Move& move : program->moves) {
    EXPECT_FALSE(move.op0.kind == Endpoint::Kind::kMemory && move.op0.slot == Slot::kOp0);
  }
  EXPECT_TRUE(GenerateGatherTree(Call(1, 0), 8)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
