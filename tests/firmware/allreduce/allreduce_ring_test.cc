#include "firmware/allreduce/allreduce_ring.h"

#include <string>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

hw::Program Generate(uint32_t rank, uint32_t world_size, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kAllreduce;
  call.rank = rank;
  call.count = count;
  absl::StatusOr<hw::Program> program = GenerateAllreduceRing(call, world_size);
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

TEST(AllreduceRingShapeTest, StepsAndMessages) {
  // count 0: nothing to do. One rank: the copy only.
  EXPECT_TRUE(Generate(0, 4, 0).moves.empty());
  const hw::Program alone = Generate(0, 1, 100);
  ASSERT_EQ(alone.moves.size(), 1u);
  EXPECT_EQ(alone.algorithm, "ring");
  // Enough elements: 2(size-1) receives and 2(size-1) sends, the first send and reduce
  // straight from op0 (no copy first).
  const hw::Program full = Generate(2, 5, 100);
  EXPECT_EQ(full.moves.size(), 4u * 4);
  EXPECT_EQ(full.moves[0].function, hw::Function::kReduce);
  EXPECT_EQ(full.moves[0].op1.slot, hw::Slot::kOp0);
  EXPECT_EQ(full.moves[1].op0.slot, hw::Slot::kOp0);
  EXPECT_EQ(Messages(full), 2 * 4);
  // Fewer elements than ranks: empty chunks send nothing.
  EXPECT_LT(Messages(Generate(2, 5, 2)), 2 * 4);
}

}  // namespace
}  // namespace cclo::firmware
