#include "firmware/allreduce/allreduce_recursive_doubling.h"

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

hw::Program Generate(uint32_t rank, uint32_t world_size, uint64_t count, bool in_place = false) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kAllreduce;
  call.rank = rank;
  call.count = count;
  call.in_place = in_place;
  absl::StatusOr<hw::Program> program = GenerateAllreduceRecursiveDoubling(call, world_size);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

int Messages(const hw::Program& program) {
  int sends = 0;
  for (const hw::Move& move : program.moves) {
    sends += move.result.kind == hw::Endpoint::Kind::kNetwork ? 1 : 0;
  }
  return sends;
}

TEST(AllreduceRecursiveDoublingShapeTest, OneExchangePerStep) {
  EXPECT_TRUE(Generate(0, 8, 0).moves.empty());
  // One rank: the copy only, or nothing in place.
  EXPECT_EQ(Generate(0, 1, 100).moves.size(), 1u);
  EXPECT_TRUE(Generate(0, 1, 100, /*in_place=*/true).moves.empty());
  // 8 ranks: step 0 sends the input and reduces the partner's with it as it arrives into
  // the result (no copy first); steps 1 and 2 receive into scratch, send and reduce.
  // Whole buffers each time.
  const hw::Program core = Generate(5, 8, 100);
  EXPECT_EQ(core.algorithm, "recursive_doubling");
  EXPECT_EQ(core.moves.size(), 2u + 2 * 3);
  EXPECT_EQ(Messages(core), 3);
  EXPECT_EQ(core.scratch_elements, 100u);
  for (const hw::Move& move : core.moves) EXPECT_EQ(move.count, 100u);
  EXPECT_EQ(core.moves[0].op0, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(core.moves[1].function, hw::Function::kReduce);
  EXPECT_EQ(core.moves[1].op0, hw::Endpoint::Network(4, hw::kCollectiveTag));
  EXPECT_EQ(core.moves[1].op1, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(core.moves[1].result, hw::Endpoint::Memory(hw::Slot::kResult, 0));
  // Partners of rank 5 in steps 0, 1, 2: 4, 7, 1.
  EXPECT_EQ(core.moves[0].result, hw::Endpoint::Network(4, hw::kCollectiveTag));
  EXPECT_EQ(core.moves[3].result, hw::Endpoint::Network(7, hw::kCollectiveTag));
  EXPECT_EQ(core.moves[6].result, hw::Endpoint::Network(1, hw::kCollectiveTag));
  // In place the input is the result, which is sent: every step goes through scratch.
  EXPECT_EQ(Generate(5, 8, 100, /*in_place=*/true).moves.size(), 3u * 3);
  // 2 ranks: one send and one reduce on arrival, no scratch.
  const hw::Program pair = Generate(1, 2, 100);
  EXPECT_EQ(pair.moves.size(), 2u);
  EXPECT_EQ(pair.scratch_elements, 0u);
}

TEST(AllreduceRecursiveDoublingShapeTest, FoldedPairsHandOverAndBack) {
  // 5 ranks: rank 0 hands its input to rank 1 and gets the result back.
  const hw::Program out = Generate(0, 5, 10);
  ASSERT_EQ(out.moves.size(), 2u);
  EXPECT_EQ(out.moves[0].result, hw::Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(out.moves[1].op0, hw::Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(out.scratch_elements, 0u);
  // Rank 1 folds rank 0's input into its own, runs 2 steps, and sends the result to rank 0.
  const hw::Program in = Generate(1, 5, 10);
  ASSERT_EQ(in.moves.size(), 1u + 2 * 3 + 1);
  EXPECT_EQ(in.moves[0].function, hw::Function::kReduce);
  EXPECT_EQ(in.moves.back().result, hw::Endpoint::Network(0, hw::kCollectiveTag));
  // Rank 4 is not paired: 2 steps, the first from its input.
  EXPECT_EQ(Generate(4, 5, 10).moves.size(), 2u + 3);
}

}  // namespace
}  // namespace cclo::firmware
