#include "firmware/barrier/barrier_dissemination.h"

#include <vector>

#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;

hw::Program Generate(uint32_t rank, uint32_t world_size) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kBarrier;
  call.rank = rank;
  absl::StatusOr<hw::Program> program = GenerateBarrierDissemination(call, world_size);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

// Rank 0 of 5: three rounds with peers 1, 2 and 4 places away, each after the previous
// round's receive, carrying nothing.
TEST(BarrierDisseminationShapeTest, RoundsOfEmptyMessages) {
  const hw::Program program = Generate(0, 5);
  EXPECT_EQ(program.algorithm, "dissemination");
  ASSERT_EQ(program.moves.size(), 2u * 3);
  const uint32_t sources[] = {4, 3, 1};
  const uint32_t destinations[] = {1, 2, 4};
  for (uint32_t round = 0; round < 3; ++round) {
    const hw::Move& receive = program.moves[2 * round];
    const hw::Move& send = program.moves[2 * round + 1];
    EXPECT_EQ(receive.op0, Endpoint::Network(sources[round], hw::kCollectiveTag));
    EXPECT_EQ(receive.result, Endpoint::None());
    EXPECT_EQ(send.result, Endpoint::Network(destinations[round], hw::kCollectiveTag));
    EXPECT_EQ(receive.count, 0u);
    EXPECT_EQ(send.count, 0u);
    const std::vector<uint32_t> previous =
        round == 0 ? std::vector<uint32_t>{} : std::vector<uint32_t>{2 * round - 2};
    EXPECT_EQ(receive.deps, previous) << "round " << round;
    EXPECT_EQ(send.deps, previous) << "round " << round;
  }
  EXPECT_TRUE(Generate(0, 1).moves.empty());
}

// Every world size runs to the end without buffers.
TEST(BarrierDisseminationShapeTest, RunsWithoutBuffers) {
  for (uint32_t world_size = 1; world_size <= 13; ++world_size) {
    std::vector<RankRun> runs(world_size);
    for (uint32_t rank = 0; rank < world_size; ++rank) {
      runs[rank].call.rank = rank;
      runs[rank].program = Generate(rank, world_size);
    }
    const absl::Status status = Execute(runs);
    EXPECT_TRUE(status.ok()) << world_size << " ranks: " << status;
  }
}

}  // namespace
}  // namespace cclo::firmware
