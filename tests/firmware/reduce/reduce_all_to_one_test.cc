#include "firmware/reduce/reduce_all_to_one.h"

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using Kind = hw::Endpoint::Kind;

hw::Program Generate(uint32_t rank, uint32_t world_size, uint32_t root, uint64_t count,
                     bool in_place = false) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kReduce;
  call.rank = rank;
  call.root = root;
  call.count = count;
  call.in_place = in_place;
  absl::StatusOr<hw::Program> program = GenerateReduceAllToOne(call, world_size);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

TEST(ReduceAllToOneShapeTest, RanksSendOnceAndTheRootReceivesAll) {
  EXPECT_TRUE(Generate(1, 4, 1, 0).moves.empty());
  // A rank other than the root sends its op0 to the root and nothing else.
  const hw::Program sender = Generate(3, 5, 1, 100);
  EXPECT_EQ(sender.algorithm, "all_to_one");
  ASSERT_EQ(sender.moves.size(), 1u);
  EXPECT_EQ(sender.moves[0].op0, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(sender.moves[0].result, hw::Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(sender.scratch_elements, 0u);
  // The root posts 4 receives without deps (all at once): the first reduces with its input
  // into the result as it arrives, the other 3 land in scratch and are reduced in after it.
  const hw::Program root = Generate(1, 5, 1, 100);
  ASSERT_EQ(root.moves.size(), 7u);
  EXPECT_EQ(root.scratch_elements, 300u);
  EXPECT_EQ(root.moves[0].function, hw::Function::kReduce);
  EXPECT_EQ(root.moves[0].op1, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(root.moves[0].result, hw::Endpoint::Memory(hw::Slot::kResult, 0));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(root.moves[i].op0.kind, Kind::kNetwork);
    EXPECT_TRUE(root.moves[i].deps.empty());
  }
  for (int i = 4; i < 7; ++i) EXPECT_EQ(root.moves[i].function, hw::Function::kReduce);
  // 2 ranks: one reduce on arrival, no scratch.
  const hw::Program pair = Generate(0, 2, 0, 100);
  ASSERT_EQ(pair.moves.size(), 1u);
  EXPECT_EQ(pair.scratch_elements, 0u);
}

TEST(ReduceAllToOneShapeTest, OneRankCopiesOrDoesNothingInPlace) {
  const hw::Program alone = Generate(0, 1, 0, 10);
  ASSERT_EQ(alone.moves.size(), 1u);
  EXPECT_EQ(alone.moves[0].result, hw::Endpoint::Memory(hw::Slot::kResult, 0));
  EXPECT_TRUE(Generate(0, 1, 0, 10, /*in_place=*/true).moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
