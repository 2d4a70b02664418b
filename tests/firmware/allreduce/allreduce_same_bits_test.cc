// Every rank of an allreduce gets the same bits, whatever the algorithm, also where the
// reduce op is not commutative bit for bit: max and min of +0 and -0 (equal, so either is
// "the" maximum) and of NaNs with different payloads. Algorithms where each rank reduces
// on its own (recursive doubling) must combine the operands in one order on every rank.
// world sizes x every allreduce algorithm x float types x max/min, through the verifier.
#include <bit>
#include <cstdint>
#include <cstring>
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

// Element `index` of `rank`'s input: mostly +0 and -0, now and then a NaN whose payload
// names the rank, and a few small numbers, each of one datatype's bits.
void Put(DataType type, uint32_t rank, uint64_t index, std::byte* out) {
  const uint64_t mixed = (uint64_t{rank} * 0x9E3779B97F4A7C15u) ^ (index * 0xC2B2AE3D27D4EB4Fu);
  const uint64_t pick = (mixed >> 29) % 16;
  const bool nan = pick == 0;
  const bool negative = pick >= 7;
  const int small = pick >= 13 ? static_cast<int>(pick) - 14 : 0;  // -1, 0 or 1
  const uint64_t payload = rank + 1;
  auto put = [out](auto bits) { std::memcpy(out, &bits, sizeof(bits)); };
  switch (type) {
    case DataType::kFloat16:
      return put(static_cast<uint16_t>(nan ? 0x7E00 | payload
                                           : (negative ? 0x8000 : 0) | (small != 0 ? 0x3C00 : 0)));
    case DataType::kBfloat16:
      return put(static_cast<uint16_t>(nan ? 0x7FC0 | payload
                                           : (negative ? 0x8000 : 0) | (small != 0 ? 0x3F80 : 0)));
    case DataType::kFloat32:
      return put(nan ? std::bit_cast<float>(static_cast<uint32_t>(0x7FC00000u | payload))
                     : (negative ? -1.0f : 1.0f) * static_cast<float>(small * small));
    case DataType::kFloat64:
      return put(nan ? std::bit_cast<double>(0x7FF8000000000000u | payload)
                     : (negative ? -1.0 : 1.0) * (small * small));
    default:
      return;
  }
}

using Param = std::tuple<const Algorithm*, uint32_t, DataType, ReduceOp>;

class AllreduceSameBitsTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllreduceSameBitsTest, EveryRankGetsTheSameBits) {
  const auto [algorithm, world_size, datatype, op] = GetParam();
  const size_t element = hw::DataTypeSize(datatype);
  for (const bool in_place : {false, true}) {
    for (const uint64_t count : {uint64_t{1}, uint64_t{7}, uint64_t{300}}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << ", in place " << in_place);
      std::vector<RankRun> runs(world_size);
      for (uint32_t rank = 0; rank < world_size; ++rank) {
        hw::CallDescriptor& call = runs[rank].call;
        call.collective = hw::Collective::kAllreduce;
        call.rank = rank;
        call.count = count;
        call.datatype = datatype;
        call.reduce_op = op;
        call.in_place = in_place;
        call.algorithm = std::string(algorithm->name);
        absl::StatusOr<hw::Program> program = Generate(call, world_size);
        ASSERT_TRUE(program.ok()) << program.status();
        runs[rank].program = *std::move(program);
        std::vector<std::byte>& input =
            runs[rank].buffers[static_cast<size_t>(in_place ? hw::Slot::kResult : hw::Slot::kOp0)];
        input.resize(count * element);
        for (uint64_t i = 0; i < count; ++i) Put(datatype, rank, i, input.data() + i * element);
        runs[rank].buffers[static_cast<size_t>(hw::Slot::kResult)].resize(count * element);
      }
      const absl::Status executed = Execute(runs);
      ASSERT_TRUE(executed.ok()) << executed;
      const std::vector<std::byte>& first = runs[0].buffers[static_cast<size_t>(hw::Slot::kResult)];
      for (uint32_t rank = 1; rank < world_size; ++rank) {
        const std::vector<std::byte>& mine =
            runs[rank].buffers[static_cast<size_t>(hw::Slot::kResult)];
        for (uint64_t i = 0; i < count; ++i) {
          ASSERT_EQ(std::memcmp(mine.data() + i * element, first.data() + i * element, element), 0)
              << "rank " << rank << " element " << i << " differs from rank 0's";
        }
      }
    }
  }
}

std::vector<const Algorithm*> Allreduces() { return ForCollective(hw::Collective::kAllreduce); }

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [algorithm, world_size, datatype, op] = info.param;
  return std::string(algorithm->name) + "_" + std::to_string(world_size) + "ranks_" +
         std::string(hw::DataTypeName(datatype)) + "_" + std::string(hw::ReduceOpName(op));
}

INSTANTIATE_TEST_SUITE_P(
    AllAllreduces, AllreduceSameBitsTest,
    ::testing::Combine(::testing::ValuesIn(Allreduces()),
                       ::testing::Values(2u, 3u, 4u, 5u, 7u, 8u, 13u),
                       ::testing::Values(DataType::kFloat16, DataType::kBfloat16,
                                         DataType::kFloat32, DataType::kFloat64),
                       ::testing::Values(ReduceOp::kMax, ReduceOp::kMin)),
    Name);

}  // namespace
}  // namespace cclo::firmware
