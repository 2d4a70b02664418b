// Every registered algorithm through the verifier, over world sizes x counts x
// (float32, int32) with sum.
#include <string>
#include <tuple>

#include "firmware/registry.h"
#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using Param = std::tuple<const Algorithm*, uint32_t, uint64_t, hw::DataType>;

std::vector<const Algorithm*> Collectives() {
  std::vector<const Algorithm*> algorithms;
  for (const Algorithm& algorithm : AllAlgorithms()) {
    if (algorithm.collective != hw::Collective::kNop) algorithms.push_back(&algorithm);
  }
  return algorithms;
}

class AlgorithmTest : public ::testing::TestWithParam<Param> {};

TEST_P(AlgorithmTest, MatchesReference) {
  const auto [algorithm, world_size, count, datatype] = GetParam();
  const bool point_to_point = algorithm->collective == hw::Collective::kSend ||
                              algorithm->collective == hw::Collective::kRecv;
  if (point_to_point && world_size < 2) GTEST_SKIP() << "send/recv needs two ranks";
  const uint32_t root = world_size / 2;
  const absl::Status status =
      VerifyCollective(algorithm->collective, algorithm->name, world_size, count, datatype,
                       hw::ReduceOp::kSum, root, /*seed=*/world_size * count);
  EXPECT_TRUE(status.ok()) << status;
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [algorithm, world_size, count, datatype] = info.param;
  return std::string(hw::CollectiveName(algorithm->collective)) + "_" +
         std::string(algorithm->name) + "_" + std::to_string(world_size) + "ranks_" +
         std::to_string(count) + "_" + std::string(hw::DataTypeName(datatype));
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, AlgorithmTest,
                         ::testing::Combine(::testing::ValuesIn(Collectives()),
                                            ::testing::Values(1u, 2u, 3u, 4u, 5u, 8u, 13u),
                                            ::testing::Values(0u, 1u, 7u, 1000u, 65537u),
                                            ::testing::Values(hw::DataType::kFloat32,
                                                              hw::DataType::kInt32)),
                         Name);

TEST(VerifyCollectiveTest, DefaultAlgorithmWhenNoneNamed) {
  EXPECT_TRUE(VerifyCollective(hw::Collective::kAllreduce, "", 3, 10, hw::DataType::kFloat32,
                               hw::ReduceOp::kSum, 0, 1)
                  .ok());
}

TEST(VerifyCollectiveTest, ReportsBadArguments) {
  EXPECT_EQ(VerifyCollective(hw::Collective::kSend, "direct", 1, 10, hw::DataType::kInt8,
                             hw::ReduceOp::kSum, 0, 1)
                .code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status status = VerifyCollective(hw::Collective::kBcast, "one_to_all", 3, 10,
                                               hw::DataType::kInt8, hw::ReduceOp::kSum, 3, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("bcast root 3 out of range"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace cclo::firmware
