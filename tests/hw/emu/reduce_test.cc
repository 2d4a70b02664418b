#include "hw/emu/reduce.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace cclo::hw::emu {
namespace {

// Test data as bytes of one datatype. Values used here are small integers, exact in
// every type, so the expected results can be computed in double.
void Store(DataType type, double value, std::byte* out) {
  auto put = [out](auto typed) { std::memcpy(out, &typed, sizeof(typed)); };
  switch (type) {
    case DataType::kInt8:
      return put(static_cast<int8_t>(value));
    case DataType::kUint8:
      return put(static_cast<uint8_t>(value));
    case DataType::kInt32:
      return put(static_cast<int32_t>(value));
    case DataType::kInt64:
      return put(static_cast<int64_t>(value));
    case DataType::kFloat16:
      return put(FloatToHalf(static_cast<float>(value)));
    case DataType::kBfloat16:
      return put(FloatToBfloat(static_cast<float>(value)));
    case DataType::kFloat32:
      return put(static_cast<float>(value));
    case DataType::kFloat64:
      return put(value);
  }
}

double Load(DataType type, const std::byte* in) {
  auto get = [in](auto typed) {
    std::memcpy(&typed, in, sizeof(typed));
    return typed;
  };
  switch (type) {
    case DataType::kInt8:
      return get(int8_t{});
    case DataType::kUint8:
      return get(uint8_t{});
    case DataType::kInt32:
      return get(int32_t{});
    case DataType::kInt64:
      return static_cast<double>(get(int64_t{}));
    case DataType::kFloat16:
      return HalfToFloat(get(uint16_t{}));
    case DataType::kBfloat16:
      return BfloatToFloat(get(uint16_t{}));
    case DataType::kFloat32:
      return get(float{});
    case DataType::kFloat64:
      return get(double{});
  }
  return 0;
}

std::vector<std::byte> Encode(DataType type, const std::vector<double>& values) {
  std::vector<std::byte> bytes(values.size() * DataTypeSize(type));
  for (size_t i = 0; i < values.size(); ++i) {
    Store(type, values[i], bytes.data() + i * DataTypeSize(type));
  }
  return bytes;
}

// The op as reduce.h defines it: max and min propagate NaN.
template <typename T>
T Apply(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMax:
      return (a > b || std::isnan(a)) ? a : b;
    case ReduceOp::kMin:
      return (a < b || std::isnan(a)) ? a : b;
  }
  return 0;
}

class ReduceAllTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(ReduceAllTest, MatchesDoubleArithmeticAndAllowsAliasing) {
  const auto [type, op] = GetParam();
  const bool is_unsigned = type == DataType::kUint8;
  const size_t size = DataTypeSize(type);
  // An odd length exercises the vector loop and its tail; buffers past 512 KiB run another
  // build of the loop (reduce.cc).
  for (const size_t count : {size_t{131}, (600 << 10) / size + 3}) {
    SCOPED_TRACE(count);
    std::vector<double> a;
    std::vector<double> b;
    std::vector<double> expected;
    for (size_t i = 0; i < count; ++i) {
      a.push_back(is_unsigned ? i % 11 : static_cast<double>(i % 11) - 5);
      b.push_back(is_unsigned ? (i * 7) % 10 : static_cast<double>((i * 7) % 10) - 4);
      expected.push_back(Apply(op, a.back(), b.back()));
    }
    const std::vector<std::byte> a_bytes = Encode(type, a);
    const std::vector<std::byte> b_bytes = Encode(type, b);

    std::vector<std::byte> out(a_bytes.size());
    ASSERT_TRUE(Reduce(op, type, a_bytes.data(), b_bytes.data(), out.data(), count).ok());
    std::vector<std::byte> in_place_a = a_bytes;
    ASSERT_TRUE(Reduce(op, type, in_place_a.data(), b_bytes.data(), in_place_a.data(), count).ok());
    std::vector<std::byte> in_place_b = b_bytes;
    ASSERT_TRUE(Reduce(op, type, a_bytes.data(), in_place_b.data(), in_place_b.data(), count).ok());

    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(Load(type, out.data() + i * size), expected[i]) << "index " << i;
    }
    EXPECT_EQ(in_place_a, out);
    EXPECT_EQ(in_place_b, out);
  }
}

TEST_P(ReduceAllTest, CountZeroTouchesNothing) {
  const auto [type, op] = GetParam();
  std::byte out{0x5A};
  EXPECT_TRUE(Reduce(op, type, nullptr, nullptr, nullptr, 0).ok());
  EXPECT_TRUE(Reduce(op, type, &out, &out, &out, 0).ok());
  EXPECT_EQ(out, std::byte{0x5A});
}

TEST_P(ReduceAllTest, UnalignedPointers) {
  const auto [type, op] = GetParam();
  // 11 elements: a vector loop of 8 (float16's F16C kernel) and a tail.
  const std::vector<double> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const std::vector<double> b = {2, 2, 1, 0, 3, 9, 1, 8, 2, 12, 0};
  std::vector<std::byte> a_bytes(1);
  std::vector<std::byte> b_bytes(3);
  for (std::byte x : Encode(type, a)) a_bytes.push_back(x);
  for (std::byte x : Encode(type, b)) b_bytes.push_back(x);
  std::vector<std::byte> out(1 + a_bytes.size());
  ASSERT_TRUE(
      Reduce(op, type, a_bytes.data() + 1, b_bytes.data() + 3, out.data() + 1, a.size()).ok());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(Load(type, out.data() + 1 + i * DataTypeSize(type)), Apply(op, a[i], b[i]));
  }
}

TEST_P(ReduceAllTest, EveryStartWithinACacheLine) {
  const auto [type, op] = GetParam();
  const size_t size = DataTypeSize(type);
  // The kernels take the elements before `out`'s first 64-byte boundary one by one, then
  // run the vector loop: every start in a line, with counts that end before the boundary,
  // on it and past it, leaves every element right and the bytes around `out` alone, into
  // a buffer of its own and in place (`out` is `a`). Reduce and ReducePortable differ for
  // float16 on a CPU with F16C.
  for (const auto reduce : {&Reduce, &ReducePortable}) {
    for (const size_t count : {size_t{1}, size_t{5}, size_t{17}, size_t{100}}) {
      std::vector<double> a;
      std::vector<double> b;
      for (size_t i = 0; i < count; ++i) {
        a.push_back(static_cast<double>(i % 7));
        b.push_back(static_cast<double>((i * 3) % 5));
      }
      const std::vector<std::byte> a_bytes = Encode(type, a);
      const std::vector<std::byte> b_bytes = Encode(type, b);
      for (const bool in_place : {false, true}) {
        for (size_t start = 0; start < 64; ++start) {
          SCOPED_TRACE(testing::Message()
                       << "portable " << (reduce == &ReducePortable) << ", count " << count
                       << ", in place " << in_place << ", start " << start);
          alignas(64) std::array<std::byte, 64 + 100 * 8 + 64> out;
          out.fill(std::byte{0x5A});
          std::byte* const first = out.data() + 64 + start;
          if (in_place) std::memcpy(first, a_bytes.data(), a_bytes.size());
          const std::byte* const input = in_place ? first : a_bytes.data();
          ASSERT_TRUE(reduce(op, type, input, b_bytes.data(), first, count).ok());
          for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(Load(type, first + i * size), Apply(op, a[i], b[i])) << "index " << i;
          }
          for (std::byte* at = out.data(); at < out.data() + out.size(); ++at) {
            if (at < first || at >= first + count * size) ASSERT_EQ(*at, std::byte{0x5A});
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryTypeAndOp, ReduceAllTest,
    ::testing::Combine(::testing::Values(DataType::kInt8, DataType::kUint8, DataType::kInt32,
                                         DataType::kInt64, DataType::kFloat16, DataType::kBfloat16,
                                         DataType::kFloat32, DataType::kFloat64),
                       ::testing::Values(ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax,
                                         ReduceOp::kMin)),
    [](const auto& info) {
      return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
             std::string(ReduceOpName(std::get<1>(info.param)));
    });

template <typename T>
T ReduceOne(ReduceOp op, DataType type, T a, T b) {
  T out;
  EXPECT_TRUE(Reduce(op, type, reinterpret_cast<const std::byte*>(&a),
                     reinterpret_cast<const std::byte*>(&b), reinterpret_cast<std::byte*>(&out), 1)
                  .ok());
  return out;
}

TEST(ReduceTest, IntegersWrap) {
  EXPECT_EQ(ReduceOne<int8_t>(ReduceOp::kSum, DataType::kInt8, 100, 100), -56);
  EXPECT_EQ(ReduceOne<uint8_t>(ReduceOp::kProd, DataType::kUint8, 16, 16), 0);
  EXPECT_EQ(
      ReduceOne<int32_t>(ReduceOp::kSum, DataType::kInt32, std::numeric_limits<int32_t>::max(), 1),
      std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ReduceOne<int64_t>(ReduceOp::kProd, DataType::kInt64, int64_t{1} << 62, 4), 0);
}

TEST(ReduceTest, MaxAndMinPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(ReduceOne<float>(ReduceOp::kMax, DataType::kFloat32, nan, 1.0f)));
  EXPECT_TRUE(std::isnan(ReduceOne<float>(ReduceOp::kMax, DataType::kFloat32, 1.0f, nan)));
  EXPECT_TRUE(std::isnan(ReduceOne<double>(ReduceOp::kMin, DataType::kFloat64, nan, 1.0)));
  EXPECT_TRUE(std::isnan(ReduceOne<double>(ReduceOp::kMin, DataType::kFloat64, 1.0, nan)));
}

TEST(ReduceTest, Float16SumRoundsOnceToNearestEven) {
  auto sum = [](float a, float b) {
    return HalfToFloat(
        ReduceOne<uint16_t>(ReduceOp::kSum, DataType::kFloat16, FloatToHalf(a), FloatToHalf(b)));
  };
  EXPECT_EQ(sum(2048, 1), 2048);                // 2049 is a tie: to even 2048
  EXPECT_EQ(sum(2048, 3), 2052);                // 2051 is a tie: to even 2052
  EXPECT_EQ(sum(1, 0x1p-11f), 1);               // tie below the first step above 1
  EXPECT_EQ(sum(1, 0x1.8p-11f), 1 + 0x1p-10f);  // above the tie
  EXPECT_TRUE(std::isinf(sum(65504, 16)));      // 65520 rounds past the largest half
  EXPECT_EQ(sum(65504, 15), 65504);
}

TEST(ReduceTest, Bfloat16SumRoundsOnceToNearestEven) {
  auto sum = [](float a, float b) {
    return BfloatToFloat(ReduceOne<uint16_t>(ReduceOp::kSum, DataType::kBfloat16, FloatToBfloat(a),
                                             FloatToBfloat(b)));
  };
  EXPECT_EQ(sum(256, 1), 256);  // 257 is a tie: to even 256
  EXPECT_EQ(sum(256, 3), 260);  // 259 is a tie: to even 260
  EXPECT_EQ(sum(1, 0x1p-8f), 1);
  EXPECT_EQ(sum(1, 0x1p-7f), 1 + 0x1p-7f);
}

TEST(HalfTest, KnownEncodings) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);
  EXPECT_EQ(FloatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(0x1p-14f), 0x0400);    // smallest normal
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);    // smallest subnormal
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);    // tie: to even zero
  EXPECT_EQ(FloatToHalf(0x1.8p-24f), 0x0002);  // tie: to even 2
  EXPECT_EQ(FloatToHalf(0x1p-26f), 0x0000);
  EXPECT_EQ(FloatToHalf(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(FloatToHalf(0x1.ffcp-15f), 0x0400);  // subnormal range rounding up to normal
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);

  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(HalfToFloat(0x03FF), 0x1.ff8p-15f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
}

// Every finite half survives the round trip, and values at, just below and just above the
// midpoint to the next half round to the right neighbour.
TEST(HalfTest, ExhaustiveRoundTripAndMidpoints) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    if ((half & 0x7C00) == 0x7C00) continue;  // inf and NaN
    const float value = HalfToFloat(half);
    ASSERT_EQ(FloatToHalf(value), half) << "bits " << bits;
    if ((half & 0x7FFF) == 0x7BFF) continue;  // the next value up is infinity
    const uint16_t next = static_cast<uint16_t>(half + 1);
    const float midpoint = (value + HalfToFloat(next)) / 2;  // exact in float
    const uint16_t even = (half & 1) == 0 ? half : next;
    ASSERT_EQ(FloatToHalf(midpoint), even) << "bits " << bits;
    ASSERT_EQ(FloatToHalf(std::nextafter(midpoint, value)), half) << "bits " << bits;
    ASSERT_EQ(FloatToHalf(std::nextafter(midpoint, 2 * midpoint)), next) << "bits " << bits;
  }
}

TEST(BfloatTest, KnownEncodings) {
  EXPECT_EQ(FloatToBfloat(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBfloat(1 + 0x1p-8f), 0x3F80);                        // tie: to even
  EXPECT_EQ(FloatToBfloat(1 + 0x1.8p-7f), 0x3F82);                      // tie: to even (up)
  EXPECT_EQ(FloatToBfloat(1 + 0x1.2p-8f), 0x3F81);                      // above the tie
  EXPECT_EQ(FloatToBfloat(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(FloatToBfloat(-0.0f), 0x8000);
  EXPECT_EQ(BfloatToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BfloatToFloat(0xC040), -3.0f);
  const uint16_t nan = FloatToBfloat(std::bit_cast<float>(0x7F800001u));  // payload in low bits
  EXPECT_TRUE(std::isnan(BfloatToFloat(nan)));
}

// float16 and bfloat16 kernels (vectorised) against the scalar conversions, element by
// element, on every 16-bit pattern paired with others (a permutation that changes every
// 65536 elements, and +0 with -0 both ways): zeros, subnormals, infinities, NaNs and
// rounding ties included, in 65536 elements and in 5 x 65536 + 3 (a tail after the vector
// loop). Reduce takes float16's F16C kernel where the CPU has it; ReducePortable the
// kernel of CPUs without.
class HalfAndBfloatKernelTest
    : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp, bool>> {};

TEST_P(HalfAndBfloatKernelTest, MatchesTheScalarConversionsOnEveryPattern) {
  const auto [type, op, portable] = GetParam();
  const bool half = type == DataType::kFloat16;
  auto to_float = [half](uint16_t bits) { return half ? HalfToFloat(bits) : BfloatToFloat(bits); };
  auto from_float = [half](float value) {
    return half ? FloatToHalf(value) : FloatToBfloat(value);
  };
  const size_t total = 5 * 65536 + 3;
  std::vector<uint16_t> a(total);
  std::vector<uint16_t> b(total);
  for (size_t i = 0; i < total; ++i) {
    a[i] = static_cast<uint16_t>(i);
    b[i] = static_cast<uint16_t>(i * 40503 + 12345 + (i >> 16) * 0x2F1);  // odd factor
  }
  a[100] = b[101] = 0x0000;
  a[101] = b[100] = 0x8000;
  for (const size_t count : {size_t{65536}, total}) {
    SCOPED_TRACE(count);
    std::vector<uint16_t> out(count);
    const auto reduce = portable ? &ReducePortable : &Reduce;
    ASSERT_TRUE(reduce(op, type, reinterpret_cast<const std::byte*>(a.data()),
                       reinterpret_cast<const std::byte*>(b.data()),
                       reinterpret_cast<std::byte*>(out.data()), count)
                    .ok());
    for (size_t i = 0; i < count; ++i) {
      const uint16_t expected = from_float(Apply(op, to_float(a[i]), to_float(b[i])));
      if (std::isnan(to_float(expected))) {  // NaN propagates; its payload may differ
        ASSERT_TRUE(std::isnan(to_float(out[i]))) << "a " << a[i] << " b " << b[i];
      } else {
        ASSERT_EQ(out[i], expected) << "a " << a[i] << " b " << b[i];
      }
    }
  }
}

std::string KernelCaseName(
    const ::testing::TestParamInfo<std::tuple<DataType, ReduceOp, bool>>& info) {
  return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
         std::string(ReduceOpName(std::get<1>(info.param))) +
         (std::get<2>(info.param) ? "_portable" : "");
}

// bfloat16 has no kernel of its own: ReducePortable is Reduce for it.
INSTANTIATE_TEST_SUITE_P(Float16, HalfAndBfloatKernelTest,
                         ::testing::Combine(::testing::Values(DataType::kFloat16),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kProd,
                                                              ReduceOp::kMax, ReduceOp::kMin),
                                            ::testing::Bool()),
                         KernelCaseName);
INSTANTIATE_TEST_SUITE_P(Bfloat16, HalfAndBfloatKernelTest,
                         ::testing::Combine(::testing::Values(DataType::kBfloat16),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kProd,
                                                              ReduceOp::kMax, ReduceOp::kMin),
                                            ::testing::Values(false)),
                         KernelCaseName);

TEST(ReduceTest, RejectsBadArguments) {
  std::byte buffer[8] = {};
  EXPECT_EQ(Reduce(ReduceOp::kSum, static_cast<DataType>(42), buffer, buffer, buffer, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reduce(static_cast<ReduceOp>(9), DataType::kInt8, buffer, buffer, buffer, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reduce(ReduceOp::kSum, DataType::kInt8, nullptr, buffer, buffer, 1).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cclo::hw::emu
