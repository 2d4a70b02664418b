// Every registered algorithm through the verifier: world sizes 1, 2, 3, 4, 5, 8, 13 x counts
// 0, 1, 7, 1000, 65537 x every datatype x every reduce op the collective uses; then every
// root and the in-place variant at small counts. Filter by collective with
// --test_filter='*/allreduce_*'.
#include <string>
#include <tuple>
#include <vector>

#include "firmware/registry.h"
#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::DataType;
using hw::ReduceOp;

constexpr DataType kDataTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                                   DataType::kInt64,   DataType::kFloat16,  DataType::kBfloat16,
                                   DataType::kFloat32, DataType::kFloat64};

bool PointToPoint(const Algorithm& algorithm) {
  return algorithm.collective == hw::Collective::kSend ||
         algorithm.collective == hw::Collective::kRecv;
}

using Param = std::tuple<const Algorithm*, uint32_t, uint64_t>;

// Every collective's algorithms (send/recv from two ranks on) at every world size and count
// up to `max_count`: only cases that run, so that none is skipped and counted as passed.
std::vector<Param> Cases(uint64_t max_count) {
  std::vector<Param> cases;
  for (const Algorithm& algorithm : AllAlgorithms()) {
    if (algorithm.collective == hw::Collective::kNop) continue;
    for (uint32_t world_size : {1u, 2u, 3u, 4u, 5u, 8u, 13u}) {
      if (PointToPoint(algorithm) && world_size < 2) continue;
      for (uint64_t count : {0u, 1u, 7u, 1000u, 65537u}) {
        if (count <= max_count) cases.emplace_back(&algorithm, world_size, count);
      }
    }
  }
  return cases;
}

std::vector<ReduceOp> OpsOf(const Algorithm& algorithm) {
  if (!hw::Reduces(algorithm.collective)) return {ReduceOp::kSum};
  return {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin};
}

class DatatypeTest : public ::testing::TestWithParam<Param> {};
class RootTest : public ::testing::TestWithParam<Param> {};

TEST_P(DatatypeTest, EveryDatatypeAndOp) {
  const auto [algorithm, world_size, count] = GetParam();
  for (DataType datatype : kDataTypes) {
    for (ReduceOp op : OpsOf(*algorithm)) {
      const VerifyCase run{.collective = algorithm->collective,
                           .algorithm = algorithm->name,
                           .world_size = world_size,
                           .count = count,
                           .datatype = datatype,
                           .op = op,
                           .root = static_cast<uint32_t>((count + 1) % world_size),
                           .seed = world_size * 131 + count};
      const absl::Status status = VerifyCollective(run);
      ASSERT_TRUE(status.ok()) << status;
    }
  }
}

TEST_P(RootTest, EveryRootAndInPlace) {
  const auto [algorithm, world_size, count] = GetParam();
  const bool rooted = hw::HasRoot(algorithm->collective);
  std::vector<bool> in_place = {false};
  if (hw::HasInPlace(algorithm->collective)) in_place.push_back(true);
  for (uint32_t root = 0; root < (rooted ? world_size : 1); ++root) {
    for (bool place : in_place) {
      for (ReduceOp op : OpsOf(*algorithm)) {
        const VerifyCase run{.collective = algorithm->collective,
                             .algorithm = algorithm->name,
                             .world_size = world_size,
                             .count = count,
                             .datatype = DataType::kInt32,
                             .op = op,
                             .root = root,
                             .in_place = place,
                             .seed = root + 7};
        const absl::Status status = VerifyCollective(run);
        ASSERT_TRUE(status.ok()) << status;
      }
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [algorithm, world_size, count] = info.param;
  return std::string(hw::CollectiveName(algorithm->collective)) + "_" +
         std::string(algorithm->name) + "_" + std::to_string(world_size) + "ranks_" +
         std::to_string(count);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, DatatypeTest, ::testing::ValuesIn(Cases(65537)), Name);
// Roots and in place are swept at counts up to 1000.
INSTANTIATE_TEST_SUITE_P(AllAlgorithms, RootTest, ::testing::ValuesIn(Cases(1000)), Name);

TEST(VerifyCollectiveTest, DefaultAlgorithmWhenNoneNamed) {
  const VerifyCase run{.collective = hw::Collective::kAllreduce, .world_size = 3, .count = 10};
  EXPECT_TRUE(VerifyCollective(run).ok());
}

TEST(VerifyCollectiveTest, ReportsBadArguments) {
  const VerifyCase lonely{.collective = hw::Collective::kSend, .algorithm = "direct",
                          .world_size = 1, .count = 10};
  EXPECT_EQ(VerifyCollective(lonely).code(), absl::StatusCode::kInvalidArgument);
  const VerifyCase bad_root{.collective = hw::Collective::kBcast, .algorithm = "one_to_all",
                            .world_size = 3, .count = 10, .root = 3};
  const absl::Status status = VerifyCollective(bad_root);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("bcast root 3 out of range"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace cclo::firmware
