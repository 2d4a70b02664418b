#include <cstring>
#include <vector>

#include "client/run/check.h"
#include "gtest/gtest.h"

namespace cclo::run {
namespace {

TEST(CheckTest, PatternIsSmallAndVaries) {
  for (uint32_t rank = 0; rank < 4; ++rank) {
    for (uint64_t index = 0; index < 100; ++index) {
      const int64_t value = PatternValue(rank, index, 5);
      EXPECT_GE(value, -30);
      EXPECT_LE(value, 30);
    }
  }
  EXPECT_NE(PatternValue(0, 0, 1), PatternValue(1, 0, 1));  // ranks differ
  EXPECT_NE(PatternValue(0, 0, 1), PatternValue(0, 1, 1));  // indices differ
  EXPECT_NE(PatternValue(0, 0, 1), PatternValue(0, 0, 2));  // runs differ
}

TEST(CheckTest, ReferencePerOp) {
  const uint64_t salt = 9;
  for (uint32_t size : {1u, 2u, 5u}) {
    for (uint32_t rank = 0; rank < size; ++rank) {
      for (uint64_t index : {uint64_t{0}, uint64_t{1}, uint64_t{1000}}) {
        OpShape shape{Op::kSendRecv, rank, size, 0, hw::ReduceOp::kSum};
        EXPECT_EQ(ExpectedValue(shape, index, salt),
                  PatternValue((rank + size - 1) % size, index, salt));
        shape.op = Op::kBcast;
        shape.root = size - 1;
        EXPECT_EQ(ExpectedValue(shape, index, salt), PatternValue(size - 1, index, salt));
        shape.op = Op::kAllreduce;
        int64_t sum = 0, max = -100, min = 100;
        for (uint32_t r = 0; r < size; ++r) {
          sum += PatternValue(r, index, salt);
          max = std::max(max, PatternValue(r, index, salt));
          min = std::min(min, PatternValue(r, index, salt));
        }
        EXPECT_EQ(ExpectedValue(shape, index, salt), sum);
        shape.reduce_op = hw::ReduceOp::kMax;
        EXPECT_EQ(ExpectedValue(shape, index, salt), max);
        shape.reduce_op = hw::ReduceOp::kMin;
        EXPECT_EQ(ExpectedValue(shape, index, salt), min);
      }
    }
  }
}

TEST(CheckTest, SentinelIsNeverAResult) {
  OpShape shape{Op::kAllreduce, 0, 1000, 0, hw::ReduceOp::kSum};
  for (uint64_t index = 0; index < 61; ++index) {
    EXPECT_LT(std::abs(ExpectedValue(shape, index, 3)), kSentinel);
  }
}

class CheckDataTypeTest : public ::testing::TestWithParam<hw::DataType> {};

TEST_P(CheckDataTypeTest, FilledReferencePassesAndAnyChangeIsFound) {
  const hw::DataType type = GetParam();
  const uint64_t count = 257;
  const OpShape shape{Op::kBcast, 1, 3, 2, hw::ReduceOp::kSum};
  std::vector<uint8_t> data(count * hw::DataTypeSize(type));
  FillPattern(type, data.data(), count, /*rank=*/2, /*salt=*/4);
  EXPECT_FALSE(FindMismatch(type, data.data(), count, shape, 4).has_value());
  EXPECT_EQ(FindMismatch(type, data.data(), count, shape, 5)->index, 0u);  // stale run

  data[100 * hw::DataTypeSize(type)] ^= 1;
  std::optional<Mismatch> mismatch = FindMismatch(type, data.data(), count, shape, 4);
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_EQ(mismatch->index, 100u);
  EXPECT_NE(mismatch->expected, mismatch->got);

  FillValue(type, data.data(), count, kSentinel);
  mismatch = FindMismatch(type, data.data(), count, shape, 4);
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_EQ(mismatch->got, "1048576");
  EXPECT_FALSE(FindMismatch(type, data.data(), 0, shape, 4).has_value());
}

INSTANTIATE_TEST_SUITE_P(AllRunDataTypes, CheckDataTypeTest,
                         ::testing::Values(hw::DataType::kInt32, hw::DataType::kInt64,
                                           hw::DataType::kFloat32, hw::DataType::kFloat64),
                         [](const auto& info) {
                           return std::string(hw::DataTypeName(info.param));
                         });

}  // namespace
}  // namespace cclo::run
