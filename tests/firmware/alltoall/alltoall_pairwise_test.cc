#include "firmware/alltoall/alltoall_pairwise.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;

hw::Program Generate(uint32_t rank, uint32_t world_size, uint64_t count, bool in_place) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kAlltoall;
  call.rank = rank;
  call.count = count;
  call.in_place = in_place;
  absl::StatusOr<hw::Program> program = GenerateAlltoallPairwise(call, world_size);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

// Rank 1 of 4: step s receives from 1-s and sends to 1+s, each step after the one before.
TEST(AlltoallPairwiseShapeTest, OneStepAfterAnother) {
  const hw::Program program = Generate(1, 4, 2, false);
  EXPECT_EQ(program.algorithm, "pairwise");
  ASSERT_EQ(program.moves.size(), 1u + 2 * 3);
  EXPECT_EQ(program.moves[0].op0, Endpoint::Memory(Slot::kOp0, 2));
  EXPECT_EQ(program.moves[0].result, Endpoint::Memory(Slot::kResult, 2));
  const uint32_t sources[] = {0, 3, 2};
  const uint32_t destinations[] = {2, 3, 0};
  for (uint32_t step = 1; step <= 3; ++step) {
    const hw::Move& receive = program.moves[2 * step - 1];
    const hw::Move& send = program.moves[2 * step];
    EXPECT_EQ(receive.op0, Endpoint::Network(sources[step - 1], hw::kCollectiveTag));
    EXPECT_EQ(receive.result, Endpoint::Memory(Slot::kResult, 2 * sources[step - 1]));
    EXPECT_EQ(send.op0, Endpoint::Memory(Slot::kOp0, 2 * destinations[step - 1]));
    EXPECT_EQ(send.result, Endpoint::Network(destinations[step - 1], hw::kCollectiveTag));
    const std::vector<uint32_t> previous =
        step == 1 ? std::vector<uint32_t>{} : std::vector<uint32_t>{2 * step - 3, 2 * step - 2};
    EXPECT_EQ(receive.deps, previous) << "step " << step;
    EXPECT_EQ(send.deps, previous) << "step " << step;
  }
}

// In place the result is copied to scratch first and sent from there.
TEST(AlltoallPairwiseShapeTest, InPlaceSendsFromScratch) {
  const hw::Program program = Generate(1, 4, 2, true);
  EXPECT_EQ(program.scratch_elements, 8u);
  ASSERT_EQ(program.moves.size(), 1u + 2 * 3);
  EXPECT_EQ(program.moves[0].result, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(program.moves[2].op0, Endpoint::Memory(Slot::kScratch, 4));
  EXPECT_EQ(program.moves[1].deps, std::vector<uint32_t>{0});
}

TEST(AlltoallPairwiseShapeTest, NothingToDo) {
  EXPECT_TRUE(Generate(1, 4, 0, false).moves.empty());
  EXPECT_EQ(Generate(0, 1, 5, false).moves.size(), 1u);
  EXPECT_TRUE(Generate(0, 1, 5, true).moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
