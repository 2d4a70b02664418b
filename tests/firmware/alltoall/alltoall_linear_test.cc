#include "firmware/alltoall/alltoall_linear.h"

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
  absl::StatusOr<hw::Program> program = GenerateAlltoallLinear(call, world_size);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

// Rank 1 of 4: its own chunk copied, receives from 0, 3, 2 and sends to 2, 3, 0, all at once.
TEST(AlltoallLinearShapeTest, EverythingPostedAtOnce) {
  const hw::Program program = Generate(1, 4, 2, false);
  EXPECT_EQ(program.algorithm, "linear");
  EXPECT_EQ(program.scratch_elements, 0u);
  ASSERT_EQ(program.moves.size(), 1u + 3 + 3);
  EXPECT_EQ(program.moves[0].op0, Endpoint::Memory(Slot::kOp0, 2));
  EXPECT_EQ(program.moves[0].result, Endpoint::Memory(Slot::kResult, 2));
  const uint32_t sources[] = {0, 3, 2};
  const uint32_t destinations[] = {2, 3, 0};
  for (int i = 0; i < 3; ++i) {
    const hw::Move& receive = program.moves[1 + i];
    EXPECT_EQ(receive.op0, Endpoint::Network(sources[i], hw::kCollectiveTag));
    EXPECT_EQ(receive.result, Endpoint::Memory(Slot::kResult, 2 * sources[i]));
    const hw::Move& send = program.moves[4 + i];
    EXPECT_EQ(send.op0, Endpoint::Memory(Slot::kOp0, 2 * destinations[i]));
    EXPECT_EQ(send.result, Endpoint::Network(destinations[i], hw::kCollectiveTag));
  }
  for (const hw::Move& move : program.moves) {
    EXPECT_EQ(move.count, 2u);
    EXPECT_TRUE(move.deps.empty());
  }
}

// In place the result is copied to scratch first and sent from there.
TEST(AlltoallLinearShapeTest, InPlaceSendsFromScratch) {
  const hw::Program program = Generate(1, 4, 2, true);
  EXPECT_EQ(program.scratch_elements, 8u);
  ASSERT_EQ(program.moves.size(), 1u + 3 + 3);
  EXPECT_EQ(program.moves[0].op0, Endpoint::Memory(Slot::kResult, 0));
  EXPECT_EQ(program.moves[0].result, Endpoint::Memory(Slot::kScratch, 0));
  EXPECT_EQ(program.moves[0].count, 8u);
  EXPECT_EQ(program.moves[4].op0, Endpoint::Memory(Slot::kScratch, 4));
  for (size_t i = 1; i < program.moves.size(); ++i) {
    EXPECT_EQ(program.moves[i].deps, std::vector<uint32_t>{0});
  }
}

TEST(AlltoallLinearShapeTest, NothingToDo) {
  EXPECT_TRUE(Generate(1, 4, 0, false).moves.empty());
  EXPECT_EQ(Generate(0, 1, 5, false).moves.size(), 1u);
  EXPECT_TRUE(Generate(0, 1, 5, true).moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
