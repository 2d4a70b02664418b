#include "firmware/bcast/bcast_one_to_all.h"

#include <string>
#include <tuple>

#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using Param = std::tuple<uint32_t, uint64_t, hw::DataType>;

class BcastOneToAllTest : public ::testing::TestWithParam<Param> {};

TEST_P(BcastOneToAllTest, EveryRoot) {
  const auto [world_size, count, datatype] = GetParam();
  for (uint32_t root = 0; root < world_size; ++root) {
    const absl::Status status =
        VerifyCollective(hw::Collective::kBcast, "one_to_all", world_size, count, datatype,
                         hw::ReduceOp::kSum, root, /*seed=*/root);
    EXPECT_TRUE(status.ok()) << status;
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [world_size, count, datatype] = info.param;
  return std::to_string(world_size) + "ranks_" + std::to_string(count) + "_" +
         std::string(hw::DataTypeName(datatype));
}

INSTANTIATE_TEST_SUITE_P(SmallWorlds, BcastOneToAllTest,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u, 4u, 5u, 8u),
                                            ::testing::Values(1u, 7u, 1000u),
                                            ::testing::Values(hw::DataType::kInt8,
                                                              hw::DataType::kFloat16,
                                                              hw::DataType::kFloat64)),
                         Name);

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
