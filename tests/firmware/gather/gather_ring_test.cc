#include "firmware/gather/gather_ring.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;

hw::CallDescriptor Call(uint32_t rank, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kGather;
  call.root = 2;
  call.rank = rank;
  call.count = count;
  return call;
}

// Root 2 of 4: the chunks travel 1 -> 0 -> 3 -> 2, so the root receives the chunks of
// ranks 3, 0, 1 (nearest first) from rank 3, then adds chunk 2.
TEST(GatherRingShapeTest, RootReceivesNearestChunkFirst) {
  absl::StatusOr<hw::Program> program = GenerateGatherRing(Call(2, 3), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "ring");
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 4u);
  const uint64_t offsets[] = {9, 0, 3};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(program->moves[i].op0, Endpoint::Network(3, hw::kCollectiveTag));
    EXPECT_EQ(program->moves[i].result, Endpoint::Memory(Slot::kResult, offsets[i]));
    EXPECT_TRUE(program->moves[i].deps.empty());
  }
  EXPECT_EQ(program->moves[3].op0, Endpoint::Memory(Slot::kOp0, 0));
  EXPECT_EQ(program->moves[3].result, Endpoint::Memory(Slot::kResult, 6));
}

TEST(GatherRingShapeTest, NextRankSendsItsOwnThenForwardsThroughScratch) {
  absl::StatusOr<hw::Program> program = GenerateGatherRing(Call(3, 3), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->scratch_elements, 6u);
  ASSERT_EQ(program->moves.size(), 5u);
  EXPECT_EQ(program->moves[0].op0, Endpoint::Memory(Slot::kOp0, 0));
  EXPECT_EQ(program->moves[0].result, Endpoint::Network(2, hw::kCollectiveTag));
  for (uint32_t step = 0; step < 2; ++step) {
    const hw::Move& receive = program->moves[1 + 2 * step];
    const hw::Move& forward = program->moves[2 + 2 * step];
    EXPECT_EQ(receive.op0, Endpoint::Network(0, hw::kCollectiveTag));
    EXPECT_EQ(receive.result.slot, Slot::kScratch);
    EXPECT_EQ(forward.op0, receive.result);
    EXPECT_EQ(forward.result, Endpoint::Network(2, hw::kCollectiveTag));
    EXPECT_EQ(forward.deps, std::vector<uint32_t>{1 + 2 * step});
  }
}

TEST(GatherRingShapeTest, FarthestRankOnlySendsAndInPlaceRootCopiesNothing) {
  absl::StatusOr<hw::Program> program = GenerateGatherRing(Call(1, 3), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 1u);
  EXPECT_EQ(program->moves[0].result, Endpoint::Network(0, hw::kCollectiveTag));
  hw::CallDescriptor call = Call(2, 3);
  call.in_place = true;
  program = GenerateGatherRing(call, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->moves.size(), 3u);
  EXPECT_TRUE(GenerateGatherRing(Call(3, 0), 4)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
