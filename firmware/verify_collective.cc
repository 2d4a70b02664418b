// VerifyCollective: random inputs, every rank's program through the registry, Execute,
// and a reference computed by plain loops in double, independent of the reduce plugin.
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "firmware/contract.h"
#include "firmware/registry.h"
#include "firmware/verifier.h"

namespace cclo::firmware {
namespace {

using hw::DataType;
using hw::ReduceOp;
using Values = std::vector<double>;
using RankValues = std::array<Values, hw::kSlotCount>;

constexpr uint32_t kPointToPointTag = 7;
// No correct output takes this value: sums stay within [-52, 52], products are 0 or
// +-2^k, max and min stay within [-100, 100]. Exact in every datatype.
constexpr double kSentinel = 111;

// Small integers, exact in every datatype, chosen per op so that no result overflows a
// float type (integer products wrap, and the reference wraps them the same way).
double Draw(std::mt19937_64& rng, DataType type, ReduceOp op) {
  const bool is_unsigned = type == DataType::kUint8;
  switch (op) {
    case ReduceOp::kSum:
      return std::uniform_int_distribution<int>(is_unsigned ? 0 : -4, 4)(rng);
    case ReduceOp::kProd: {
      const int magnitude = std::uniform_int_distribution<int>(1, 2)(rng);
      return is_unsigned || std::bernoulli_distribution(0.5)(rng) ? magnitude : -magnitude;
    }
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return std::uniform_int_distribution<int>(is_unsigned ? 0 : -100, 100)(rng);
  }
  return 0;
}

// float16 bits of an integer of magnitude at most 2048 (exact there).
uint16_t HalfOfInteger(double value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (value == 0) return sign;
  int exponent = 0;
  const double fraction = std::frexp(std::fabs(value), &exponent);  // in [0.5, 1)
  const auto mantissa = static_cast<uint16_t>((fraction * 2 - 1) * 1024);
  return static_cast<uint16_t>(sign | ((exponent - 1 + 15) << 10) | mantissa);
}

double HalfValue(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  double magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  if (exponent == 0) magnitude = std::ldexp(mantissa, -24);
  if (exponent == 31) magnitude = mantissa == 0 ? INFINITY : NAN;
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

void Encode(DataType type, double value, std::byte* out) {
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
      return put(HalfOfInteger(value));
    case DataType::kBfloat16:  // small integers have few significant bits: truncation is exact
      return put(static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(value)) >> 16));
    case DataType::kFloat32:
      return put(static_cast<float>(value));
    case DataType::kFloat64:
      return put(value);
  }
}

double Decode(DataType type, const std::byte* in) {
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
      return HalfValue(get(uint16_t{}));
    case DataType::kBfloat16:
      return std::bit_cast<float>(uint32_t{get(uint16_t{})} << 16);
    case DataType::kFloat32:
      return get(float{});
    case DataType::kFloat64:
      return get(double{});
  }
  return 0;
}

// a (op) b as the datatype computes it: exact for our inputs, integers wrapping.
double Combine(DataType type, ReduceOp op, double a, double b) {
  double result = 0;
  switch (op) {
    case ReduceOp::kSum:
      result = a + b;
      break;
    case ReduceOp::kProd:
      result = a * b;
      break;
    case ReduceOp::kMax:
      result = std::max(a, b);
      break;
    case ReduceOp::kMin:
      result = std::min(a, b);
      break;
  }
  if (type == DataType::kInt8) return static_cast<int8_t>(static_cast<int64_t>(result));
  if (type == DataType::kUint8) return static_cast<uint8_t>(static_cast<int64_t>(result));
  return result;
}

// Whether the collective writes this slot of this rank.
bool IsOutput(const hw::CallDescriptor& call, hw::Slot slot) {
  if (slot != hw::Slot::kResult) return false;
  return call.collective == hw::Collective::kRecv ||
         call.collective == hw::Collective::kAllreduce ||
         (call.collective == hw::Collective::kBcast && call.rank != call.root);
}

// The expected final buffers, from the initial ones, by plain loops.
std::vector<RankValues> Reference(hw::Collective collective, const hw::CallDescriptor& call,
                                  std::vector<RankValues> values) {
  const size_t last = values.size() - 1;
  const auto op0 = static_cast<size_t>(hw::Slot::kOp0);
  const auto result = static_cast<size_t>(hw::Slot::kResult);
  switch (collective) {
    case hw::Collective::kSend:
    case hw::Collective::kRecv:
      values[last][result] = values[0][op0];
      break;
    case hw::Collective::kBcast:
      for (RankValues& rank : values) rank[result] = values[call.root][result];
      break;
    case hw::Collective::kAllreduce: {
      Values reduced = values[0][op0];
      for (size_t rank = 1; rank < values.size(); ++rank) {
        for (size_t i = 0; i < reduced.size(); ++i) {
          reduced[i] = Combine(call.datatype, call.reduce_op, reduced[i], values[rank][op0][i]);
        }
      }
      for (RankValues& rank : values) rank[result] = reduced;
      break;
    }
    case hw::Collective::kNop:
      break;
  }
  return values;
}

}  // namespace

absl::Status VerifyCollective(hw::Collective collective, std::string_view algorithm,
                              uint32_t world_size, uint64_t count, DataType datatype, ReduceOp op,
                              uint32_t root, uint64_t seed) {
  const bool point_to_point =
      collective == hw::Collective::kSend || collective == hw::Collective::kRecv;
  if (point_to_point && world_size < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("send/recv needs at least 2 ranks, got ", world_size));
  }
  const std::string what =
      absl::StrCat(std::string(hw::CollectiveName(collective)), " '", std::string(algorithm), "', ",
                   world_size, " ranks, ", count, " ", std::string(hw::DataTypeName(datatype)),
                   " elements, ", std::string(hw::ReduceOpName(op)), ", root ", root, ": ");
  const size_t element_size = hw::DataTypeSize(datatype);
  std::mt19937_64 rng(seed);
  std::vector<RankRun> runs(world_size);
  std::vector<RankValues> initial(world_size);
  for (uint32_t rank = 0; rank < world_size; ++rank) {
    hw::CallDescriptor& call = runs[rank].call;
    call.collective = collective;
    call.rank = rank;
    call.root = root;
    call.datatype = datatype;
    call.reduce_op = op;
    call.count = count;
    call.algorithm = std::string(algorithm);
    if (point_to_point) {
      call.collective = rank == 0                ? hw::Collective::kSend
                        : rank == world_size - 1 ? hw::Collective::kRecv
                                                 : hw::Collective::kNop;
      call.peer = rank == 0 ? world_size - 1 : 0;
      call.tag = kPointToPointTag;
      if (call.collective == hw::Collective::kNop) call.algorithm.clear();
    }
    absl::StatusOr<hw::Program> program = Generate(call, world_size);
    if (!program.ok()) {
      return absl::Status(program.status().code(),
                          absl::StrCat(what, "rank ", rank, ": ", program.status().message()));
    }
    if (!call.algorithm.empty() && program->algorithm != call.algorithm) {
      return absl::InternalError(
          absl::StrCat(what, "rank ", rank, ": program says algorithm '", program->algorithm, "'"));
    }
    runs[rank].program = *std::move(program);
    for (size_t slot = 0; slot < hw::kSlotCount; ++slot) {
      const auto typed_slot = static_cast<hw::Slot>(slot);
      const uint64_t elements = RequiredElements(call.collective, typed_slot, count, world_size);
      Values& values = initial[rank][slot];
      runs[rank].buffers[slot].resize(elements * element_size);
      for (uint64_t i = 0; i < elements; ++i) {
        values.push_back(IsOutput(call, typed_slot) ? kSentinel : Draw(rng, datatype, op));
        Encode(datatype, values.back(), runs[rank].buffers[slot].data() + i * element_size);
      }
    }
  }

  if (absl::Status executed = Execute(runs); !executed.ok()) {
    return absl::Status(executed.code(), absl::StrCat(what, executed.message()));
  }

  const std::vector<RankValues> expected = Reference(collective, runs[0].call, initial);
  for (uint32_t rank = 0; rank < world_size; ++rank) {
    for (size_t slot = 0; slot < hw::kSlotCount; ++slot) {
      for (size_t i = 0; i < expected[rank][slot].size(); ++i) {
        const double got = Decode(datatype, runs[rank].buffers[slot].data() + i * element_size);
        if (got != expected[rank][slot][i]) {
          return absl::InternalError(absl::StrCat(what, "rank ", rank, " slot ", slot, " [", i,
                                                  "]: expected ", expected[rank][slot][i], ", got ",
                                                  got));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace cclo::firmware
