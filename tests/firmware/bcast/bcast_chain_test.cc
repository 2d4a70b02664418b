#include "firmware/bcast/bcast_chain.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;

hw::CallDescriptor Call(uint32_t rank, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kBcast;
  call.datatype = hw::DataType::kFloat32;
  call.root = 3;
  call.rank = rank;
  call.count = count;
  return call;
}

TEST(BcastChainShapeTest, PiecesOfAbout64KiB) {
  EXPECT_EQ(BcastChainPieces(0, 4), 0u);
  EXPECT_EQ(BcastChainPieces(1, 4), 1u);
  EXPECT_EQ(BcastChainPieces(16384, 4), 1u);
  EXPECT_EQ(BcastChainPieces(16385, 4), 2u);
  EXPECT_EQ(BcastChainPieces(65537, 4), 5u);
  EXPECT_EQ(BcastChainPieces(uint64_t{1} << 30, 8), 64u);
  EXPECT_EQ(BcastChainPieces(UINT64_MAX, 8), 64u);
}

// 65537 float32 elements make 5 pieces. Root 3 of 4: the chain is 3 -> 0 -> 1 -> 2.
TEST(BcastChainShapeTest, RootSendsEveryPieceToTheRight) {
  absl::StatusOr<hw::Program> program = GenerateBcastChain(Call(3, 65537), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "chain");
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 5u);
  uint64_t offset = 0;
  for (const hw::Move& move : program->moves) {
    EXPECT_EQ(move.op0, Endpoint::Memory(hw::Slot::kResult, offset));
    EXPECT_EQ(move.result, Endpoint::Network(0, hw::kCollectiveTag));
    EXPECT_TRUE(move.deps.empty());
    offset += move.count;
  }
  EXPECT_EQ(offset, 65537u);
}

TEST(BcastChainShapeTest, InnerRankForwardsEachPieceAfterReceivingIt) {
  absl::StatusOr<hw::Program> program = GenerateBcastChain(Call(1, 65537), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 10u);
  for (uint32_t piece = 0; piece < 5; ++piece) {
    const hw::Move& receive = program->moves[2 * piece];
    const hw::Move& forward = program->moves[2 * piece + 1];
    EXPECT_EQ(receive.op0, Endpoint::Network(0, hw::kCollectiveTag));
    EXPECT_EQ(forward.result, Endpoint::Network(2, hw::kCollectiveTag));
    EXPECT_EQ(forward.op0, receive.result);
    EXPECT_EQ(forward.deps, std::vector<uint32_t>{2 * piece});
  }
  // The last rank of the chain only receives.
  program = GenerateBcastChain(Call(2, 65537), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 5u);
  for (const hw::Move& move : program->moves) {
    EXPECT_EQ(move.op0, Endpoint::Network(1, hw::kCollectiveTag));
  }
  EXPECT_TRUE(GenerateBcastChain(Call(1, 0), 4)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
