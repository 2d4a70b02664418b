#include "firmware/reduce/reduce_ring.h"

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using Kind = hw::Endpoint::Kind;

hw::Program Generate(uint32_t rank, uint32_t world_size, uint32_t root, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kReduce;
  call.rank = rank;
  call.root = root;
  call.count = count;
  call.datatype = hw::DataType::kFloat32;
  absl::StatusOr<hw::Program> program = GenerateReduceRing(call, world_size);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

TEST(ReduceRingTest, PiecesOfAbout64KiBBounded) {
  EXPECT_EQ(ReduceRingPieces(0, 4), 0u);
  EXPECT_EQ(ReduceRingPieces(1, 4), 1u);
  EXPECT_EQ(ReduceRingPieces(16384, 4), 1u);  // exactly 64 KiB
  EXPECT_EQ(ReduceRingPieces(16385, 4), 2u);
  EXPECT_EQ(ReduceRingPieces(65537, 8), 9u);
  EXPECT_EQ(ReduceRingPieces(uint64_t{1} << 40, 1), 256u);
  EXPECT_EQ(ReduceRingPieces(UINT64_MAX, 8), 256u);
}

TEST(ReduceRingShapeTest, ChainFromTheRankAfterTheRootToTheRoot) {
  EXPECT_TRUE(Generate(0, 4, 2, 0).moves.empty());
  // 40000 float32 elements: 3 pieces. Root 2 of 4: the chain is 3, 0, 1, 2.
  const uint64_t count = 40000;
  const hw::Program first = Generate(3, 4, 2, count);
  EXPECT_EQ(first.algorithm, "ring");
  ASSERT_EQ(first.moves.size(), 3u);
  for (const hw::Move& move : first.moves) {
    EXPECT_EQ(move.result, hw::Endpoint::Network(0, hw::kCollectiveTag));
    EXPECT_EQ(move.op0.slot, hw::Slot::kOp0);
  }
  EXPECT_EQ(first.scratch_elements, 0u);
  // A rank between: per piece a reduce from the left into scratch and a send to the right.
  const hw::Program middle = Generate(0, 4, 2, count);
  ASSERT_EQ(middle.moves.size(), 6u);
  EXPECT_EQ(middle.scratch_elements, count);
  EXPECT_EQ(middle.moves[0].op0, hw::Endpoint::Network(3, hw::kCollectiveTag));
  EXPECT_EQ(middle.moves[1].result, hw::Endpoint::Network(1, hw::kCollectiveTag));
  // The root: per piece a reduce from the left into result.
  const hw::Program root = Generate(2, 4, 2, count);
  ASSERT_EQ(root.moves.size(), 3u);
  uint64_t covered = 0;
  for (const hw::Move& move : root.moves) {
    EXPECT_EQ(move.op0.kind, Kind::kNetwork);
    EXPECT_EQ(move.result.slot, hw::Slot::kResult);
    EXPECT_EQ(move.result.offset, covered);
    covered += move.count;
  }
  EXPECT_EQ(covered, count);
}

TEST(ReduceRingShapeTest, FewElementsMakeAsManyPieces) {
  // Never more pieces than elements: 1 element, 1 piece.
  EXPECT_EQ(Generate(2, 4, 2, 1).moves.size(), 1u);
  EXPECT_EQ(Generate(0, 1, 0, 5).moves.size(), 1u);
}

}  // namespace
}  // namespace cclo::firmware
