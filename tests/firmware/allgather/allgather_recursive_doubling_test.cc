#include "firmware/allgather/allgather_recursive_doubling.h"

#include <vector>

#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;

hw::Program Generate(uint32_t rank, uint32_t world_size, uint64_t count, bool in_place = false) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kAllgather;
  call.rank = rank;
  call.count = count;
  call.in_place = in_place;
  absl::StatusOr<hw::Program> program = GenerateAllgatherRecursiveDoubling(call, world_size);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

void ExpectReceive(const hw::Move& move, uint32_t from, uint64_t offset, uint64_t count) {
  EXPECT_EQ(move.op0, Endpoint::Network(from, hw::kCollectiveTag));
  EXPECT_EQ(move.result, Endpoint::Memory(Slot::kResult, offset));
  EXPECT_EQ(move.count, count);
}

void ExpectSend(const hw::Move& move, uint32_t to, uint64_t offset, uint64_t count) {
  EXPECT_EQ(move.op0, Endpoint::Memory(Slot::kResult, offset));
  EXPECT_EQ(move.result, Endpoint::Network(to, hw::kCollectiveTag));
  EXPECT_EQ(move.count, count);
}

// 8 ranks: rank 5 swaps with 4, 7 and 1 what it has gathered, doubling each step.
TEST(AllgatherRecursiveDoublingShapeTest, PowerOfTwoDoublesEachStep) {
  const hw::Program program = Generate(5, 8, 3);
  EXPECT_EQ(program.algorithm, "recursive_doubling");
  ASSERT_EQ(program.moves.size(), 1u + 2 * 3);
  EXPECT_EQ(program.moves[0].result, Endpoint::Memory(Slot::kResult, 15));
  ExpectReceive(program.moves[1], 4, 12, 3);
  ExpectSend(program.moves[2], 4, 15, 3);
  ExpectReceive(program.moves[3], 7, 18, 6);
  ExpectSend(program.moves[4], 7, 12, 6);
  ExpectReceive(program.moves[5], 1, 0, 12);
  ExpectSend(program.moves[6], 1, 12, 12);
  // Each send waits for what it passes on; the receives write fresh ranges.
  EXPECT_EQ(program.moves[4].deps, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(program.moves[5].deps.empty());
  EXPECT_EQ(program.moves[6].deps, (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(Generate(5, 8, 3, true).moves.size(), 2u * 3);
}

// 6 ranks: p = 4, pairs (0,1) and (2,3) fold into core ranks 0 and 1 (ranks 1 and 3).
TEST(AllgatherRecursiveDoublingShapeTest, FoldedWorld) {
  // Rank 0 sits out: its chunk to rank 1, everything back.
  const hw::Program even = Generate(0, 6, 2);
  ASSERT_EQ(even.moves.size(), 3u);
  ExpectSend(even.moves[1], 1, 0, 2);
  ExpectReceive(even.moves[2], 1, 0, 12);
  // Rank 1 takes chunk 0, swaps chunks 0-1 for 2-3 with rank 3, chunks 0-3 for 4-5 with
  // rank 4, and sends everything back to rank 0.
  const hw::Program odd = Generate(1, 6, 2);
  ASSERT_EQ(odd.moves.size(), 1u + 1 + 2 * 2 + 1);
  ExpectReceive(odd.moves[1], 0, 0, 2);
  ExpectReceive(odd.moves[2], 3, 4, 4);
  ExpectSend(odd.moves[3], 3, 0, 4);
  ExpectReceive(odd.moves[4], 4, 8, 4);
  ExpectSend(odd.moves[5], 4, 0, 8);
  ExpectSend(odd.moves[6], 0, 0, 12);
  // Rank 4 (core 2, unpaired) swaps its own chunk with rank 5, then chunks 4-5 for 0-3.
  const hw::Program core = Generate(4, 6, 2);
  ASSERT_EQ(core.moves.size(), 1u + 2 * 2);
  ExpectReceive(core.moves[1], 5, 10, 2);
  ExpectSend(core.moves[2], 5, 8, 2);
  ExpectReceive(core.moves[3], 1, 0, 8);
  ExpectSend(core.moves[4], 1, 8, 4);
}

TEST(AllgatherRecursiveDoublingShapeTest, NothingToDo) {
  EXPECT_TRUE(Generate(2, 5, 0).moves.empty());
  EXPECT_EQ(Generate(0, 1, 4).moves.size(), 1u);
  EXPECT_TRUE(Generate(0, 1, 4, true).moves.empty());
}

// Every fold layout: world sizes 1 to 20, in place and not, through the verifier.
TEST(AllgatherRecursiveDoublingShapeTest, EveryWorldSizeUpToTwenty) {
  for (uint32_t world_size = 1; world_size <= 20; ++world_size) {
    for (bool in_place : {false, true}) {
      const VerifyCase run{.collective = hw::Collective::kAllgather,
                           .algorithm = "recursive_doubling",
                           .world_size = world_size,
                           .count = 3,
                           .datatype = hw::DataType::kInt32,
                           .in_place = in_place,
                           .seed = world_size};
      const absl::Status status = VerifyCollective(run);
      EXPECT_TRUE(status.ok()) << status;
    }
  }
}

}  // namespace
}  // namespace cclo::firmware
