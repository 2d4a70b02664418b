#include "firmware/bcast/bcast_one_to_all.h"


#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

TEST(BcastOneToAllShapeTest, RootSendsToEveryOtherRank) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kBcast;
  call.root = 2;
  call.rank = 2;
  call.count = 9;
  absl::StatusOr<hw::Program> program = GenerateBcastOneToAll(call, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 3u);
  EXPECT_EQ(program->moves[0].result, hw::Endpoint::Network(0, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[2].result, hw::Endpoint::Network(3, hw::kCollectiveTag));
  for (const hw::Move& move : program->moves) EXPECT_TRUE(move.deps.empty());
  call.rank = 1;
  program = GenerateBcastOneToAll(call, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ(program->moves.size(), 1u);
  EXPECT_EQ(program->moves[0].op0, hw::Endpoint::Network(2, hw::kCollectiveTag));
  call.count = 0;
  EXPECT_TRUE(GenerateBcastOneToAll(call, 4)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
