#include "firmware/allreduce/allreduce_ring.h"

#include <string>
#include <tuple>

#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::DataType;
using hw::ReduceOp;
using Param = std::tuple<DataType, ReduceOp, uint32_t, uint64_t>;

class AllreduceRingTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllreduceRingTest, EveryDatatypeAndOp) {
  const auto [datatype, op, world_size, count] = GetParam();
  const absl::Status status = VerifyCollective(hw::Collective::kAllreduce, "ring", world_size,
                                               count, datatype, op, 0, /*seed=*/count + 17);
  EXPECT_TRUE(status.ok()) << status;
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [datatype, op, world_size, count] = info.param;
  return std::string(hw::DataTypeName(datatype)) + "_" + std::string(hw::ReduceOpName(op)) + "_" +
         std::to_string(world_size) + "ranks_" + std::to_string(count);
}

INSTANTIATE_TEST_SUITE_P(
    Product, AllreduceRingTest,
    ::testing::Combine(::testing::Values(DataType::kInt8, DataType::kUint8, DataType::kInt32,
                                         DataType::kInt64, DataType::kFloat16, DataType::kBfloat16,
                                         DataType::kFloat32, DataType::kFloat64),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax,
                                         ReduceOp::kMin),
                       ::testing::Values(3u, 8u), ::testing::Values(7u, 1000u)),
    Name);

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
  // Enough elements: copy, then 2(size-1) receives and 2(size-1) sends.
  const hw::Program full = Generate(2, 5, 100);
  EXPECT_EQ(full.moves.size(), 1u + 4 * 4);
  EXPECT_EQ(Messages(full), 2 * 4);
  // Fewer elements than ranks: empty chunks send nothing.
  EXPECT_LT(Messages(Generate(2, 5, 2)), 2 * 4);
}

}  // namespace
}  // namespace cclo::firmware
