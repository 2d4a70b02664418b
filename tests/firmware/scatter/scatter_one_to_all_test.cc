#include "firmware/scatter/scatter_one_to_all.h"

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;

hw::CallDescriptor Call(uint32_t rank, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kScatter;
  call.root = 1;
  call.rank = rank;
  call.count = count;
  return call;
}

TEST(ScatterOneToAllShapeTest, RootSendsChunkIToRankIAndKeepsItsOwn) {
  absl::StatusOr<hw::Program> program = GenerateScatterOneToAll(Call(1, 5), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "one_to_all");
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 4u);
  const uint32_t ranks[] = {0, 2, 3};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(program->moves[i].op0, Endpoint::Memory(Slot::kOp0, ranks[i] * 5));
    EXPECT_EQ(program->moves[i].result, Endpoint::Network(ranks[i], hw::kCollectiveTag));
    EXPECT_EQ(program->moves[i].count, 5u);
  }
  EXPECT_EQ(program->moves[3].op0, Endpoint::Memory(Slot::kOp0, 5));
  EXPECT_EQ(program->moves[3].result, Endpoint::Memory(Slot::kResult, 0));
  for (const hw::Move& move : program->moves) EXPECT_TRUE(move.deps.empty());
}

TEST(ScatterOneToAllShapeTest, InPlaceRootSendsFromResultAndCopiesNothing) {
  hw::CallDescriptor call = Call(1, 5);
  call.in_place = true;
  absl::StatusOr<hw::Program> program = GenerateScatterOneToAll(call, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 3u);
  EXPECT_EQ(program->moves[2].op0, Endpoint::Memory(Slot::kResult, 15));
  EXPECT_EQ(program->moves[2].result, Endpoint::Network(3, hw::kCollectiveTag));
}

TEST(ScatterOneToAllShapeTest, OtherRanksReceiveOneChunk) {
  absl::StatusOr<hw::Program> program = GenerateScatterOneToAll(Call(3, 5), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 1u);
  EXPECT_EQ(program->moves[0].op0, Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[0].result, Endpoint::Memory(Slot::kResult, 0));
  EXPECT_TRUE(GenerateScatterOneToAll(Call(1, 0), 4)->moves.empty());
  EXPECT_TRUE(GenerateScatterOneToAll(Call(3, 0), 4)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
