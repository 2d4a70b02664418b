#include "firmware/allreduce/allreduce_reduce_bcast.h"

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

hw::Program Generate(uint32_t rank, uint32_t world_size, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kAllreduce;
  call.rank = rank;
  call.count = count;
  absl::StatusOr<hw::Program> program = GenerateAllreduceReduceBcast(call, world_size);
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

TEST(AllreduceReduceBcastShapeTest, ReduceUpThenBroadcastDown) {
  EXPECT_TRUE(Generate(0, 4, 0).moves.empty());
  // One rank: the copy only.
  const hw::Program alone = Generate(0, 1, 100);
  ASSERT_EQ(alone.moves.size(), 1u);
  EXPECT_EQ(alone.algorithm, "reduce_bcast");
  // Every rank but rank 0 sends once up and receives once down; over the world, the
  // messages up and down are size-1 each.
  for (uint32_t world_size : {2u, 5u, 8u, 13u}) {
    int messages = 0;
    for (uint32_t rank = 0; rank < world_size; ++rank) {
      const hw::Program program = Generate(rank, world_size, 100);
      messages += Messages(program);
      for (const hw::Move& move : program.moves) EXPECT_EQ(move.count, 100u);
    }
    EXPECT_EQ(messages, 2 * static_cast<int>(world_size - 1)) << world_size << " ranks";
  }
  // Rank 0 of 8 receives from its 2 tree children and ends by sending to its 3 binomial
  // children; it needs no scratch, as it reduces into result.
  const hw::Program root = Generate(0, 8, 100);
  EXPECT_EQ(root.moves.size(), 2u + 3u);
  EXPECT_EQ(root.scratch_elements, 0u);
}

}  // namespace
}  // namespace cclo::firmware
