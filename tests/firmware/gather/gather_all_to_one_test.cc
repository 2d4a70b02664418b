#include "firmware/gather/gather_all_to_one.h"

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;

hw::CallDescriptor Call(uint32_t rank, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kGather;
  call.root = 1;
  call.rank = rank;
  call.count = count;
  return call;
}

TEST(GatherAllToOneShapeTest, RootReceivesChunkIFromRankIAndAddsItsOwn) {
  absl::StatusOr<hw::Program> program = GenerateGatherAllToOne(Call(1, 5), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "all_to_one");
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 4u);
  const uint32_t ranks[] = {0, 2, 3};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(program->moves[i].op0, Endpoint::Network(ranks[i], hw::kCollectiveTag));
    EXPECT_EQ(program->moves[i].result, Endpoint::Memory(Slot::kResult, ranks[i] * 5));
    EXPECT_EQ(program->moves[i].count, 5u);
  }
  EXPECT_EQ(program->moves[3].op0, Endpoint::Memory(Slot::kOp0, 0));
  EXPECT_EQ(program->moves[3].result, Endpoint::Memory(Slot::kResult, 5));
  for (const hw::Move& move : program->moves) EXPECT_TRUE(move.deps.empty());
}

TEST(GatherAllToOneShapeTest, InPlaceRootOnlyReceives) {
  hw::CallDescriptor call = Call(1, 5);
  call.in_place = true;
  absl::StatusOr<hw::Program> program = GenerateGatherAllToOne(call, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 3u);
  for (const hw::Move& move : program->moves) {
    EXPECT_EQ(move.op0.kind, Endpoint::Kind::kNetwork);
  }
}

TEST(GatherAllToOneShapeTest, OtherRanksSendTheirInput) {
  absl::StatusOr<hw::Program> program = GenerateGatherAllToOne(Call(3, 5), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 1u);
  EXPECT_EQ(program->moves[0].op0, Endpoint::Memory(Slot::kOp0, 0));
  EXPECT_EQ(program->moves[0].result, Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_TRUE(GenerateGatherAllToOne(Call(1, 0), 4)->moves.empty());
  EXPECT_TRUE(GenerateGatherAllToOne(Call(3, 0), 4)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
