// VerifyCollective: random inputs, every rank's program through the registry, Execute,
// and a reference computed by plain loops in double, independent of the reduce plugin.
#include <algorithm>
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
using RankValues = std::array<Values, 3>;  // op0, op1, result

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

constexpr size_t kOp0 = static_cast<size_t>(hw::Slot::kOp0);
constexpr size_t kResult = static_cast<size_t>(hw::Slot::kResult);

// Whether element `index` of `slot` holds input (drawn at random) rather than waiting for
// output (pre-filled with the sentinel).
bool IsInput(const hw::CallDescriptor& call, size_t slot, uint64_t index) {
  if (slot != kResult) return true;
  const uint64_t chunk = call.count == 0 ? 0 : index / call.count;
  const bool root = call.rank == call.root;
  switch (call.collective) {
    case hw::Collective::kBcast:
      return root;
    case hw::Collective::kGather:
      return call.in_place && chunk == call.root;
    case hw::Collective::kAllgather:
      return call.in_place && chunk == call.rank;
    case hw::Collective::kScatter:
    case hw::Collective::kReduce:
    case hw::Collective::kAllreduce:
    case hw::Collective::kReduceScatter:
    case hw::Collective::kAlltoall:
      return call.in_place;
    default:
      return false;
  }
}

// The n elements of `values` starting at chunk * n.
Values Chunk(const Values& values, uint64_t chunk, uint64_t n) {
  return Values(values.begin() + static_cast<ptrdiff_t>(chunk * n),
                values.begin() + static_cast<ptrdiff_t>((chunk + 1) * n));
}

void Place(Values& values, uint64_t chunk, const Values& part) {
  std::copy(part.begin(), part.end(), values.begin() + static_cast<ptrdiff_t>(chunk * part.size()));
}

Values Combined(const VerifyCase& run, const std::vector<Values>& inputs) {
  Values reduced = inputs[0];
  for (size_t rank = 1; rank < inputs.size(); ++rank) {
    for (size_t i = 0; i < reduced.size(); ++i) {
      reduced[i] = Combine(run.datatype, run.op, reduced[i], inputs[rank][i]);
    }
  }
  return reduced;
}

// The expected final buffers, from the initial ones, by plain loops. NaN marks an element
// whose final value is not defined.
std::vector<RankValues> Reference(const VerifyCase& run, const std::vector<RankRun>& runs,
                                  std::vector<RankValues> values) {
  const uint64_t n = run.count;
  const size_t size = values.size();
  const uint32_t root = run.root;
  // Each rank's input: op0, or the result buffer in place.
  std::vector<Values> inputs(size);
  for (size_t rank = 0; rank < size; ++rank) {
    inputs[rank] = values[rank][runs[rank].call.in_place ? kResult : kOp0];
  }
  switch (run.collective) {
    case hw::Collective::kSend:
    case hw::Collective::kRecv:
      values[size - 1][kResult] = values[0][kOp0];
      break;
    case hw::Collective::kBcast:
      for (RankValues& rank : values) rank[kResult] = values[root][kResult];
      break;
    case hw::Collective::kScatter:
      for (size_t rank = 0; rank < size; ++rank) {
        if (rank == root && run.in_place) continue;
        values[rank][kResult] = Chunk(inputs[root], rank, n);
      }
      break;
    case hw::Collective::kGather:
      for (size_t rank = 0; rank < size; ++rank) {
        Place(values[root][kResult], rank,
              rank == root && run.in_place ? Chunk(inputs[rank], rank, n) : inputs[rank]);
      }
      break;
    case hw::Collective::kAllgather:
      for (size_t to = 0; to < size; ++to) {
        for (size_t from = 0; from < size; ++from) {
          Place(values[to][kResult], from, run.in_place ? Chunk(inputs[from], from, n) : inputs[from]);
        }
      }
      break;
    case hw::Collective::kReduce:
      values[root][kResult] = Combined(run, inputs);
      break;
    case hw::Collective::kAllreduce: {
      const Values reduced = Combined(run, inputs);
      for (RankValues& rank : values) rank[kResult] = reduced;
      break;
    }
    case hw::Collective::kReduceScatter: {
      const Values reduced = Combined(run, inputs);
      for (size_t rank = 0; rank < size; ++rank) {
        Values& result = values[rank][kResult];
        if (run.in_place) std::fill(result.begin() + static_cast<ptrdiff_t>(n), result.end(), NAN);
        std::copy_n(reduced.begin() + static_cast<ptrdiff_t>(rank * n), n, result.begin());
      }
      break;
    }
    case hw::Collective::kAlltoall:
      for (size_t to = 0; to < size; ++to) {
        for (size_t from = 0; from < size; ++from) {
          Place(values[to][kResult], from, Chunk(inputs[from], to, n));
        }
      }
      break;
    case hw::Collective::kBarrier:
    case hw::Collective::kNop:
      break;
  }
  return values;
}

}  // namespace

absl::Status VerifyCollective(const VerifyCase& run) {
  const uint32_t world_size = run.world_size;
  const bool point_to_point =
      run.collective == hw::Collective::kSend || run.collective == hw::Collective::kRecv;
  if (point_to_point && world_size < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("send/recv needs at least 2 ranks, got ", world_size));
  }
  const std::string what = absl::StrCat(
      std::string(hw::CollectiveName(run.collective)), " '", std::string(run.algorithm), "', ",
      world_size, " ranks, ", run.count, " ", std::string(hw::DataTypeName(run.datatype)),
      " elements, ", std::string(hw::ReduceOpName(run.op)), ", root ", run.root,
      run.in_place ? ", in place" : "", ": ");
  const size_t element_size = hw::DataTypeSize(run.datatype);
  std::mt19937_64 rng(run.seed);
  std::vector<RankRun> runs(world_size);
  std::vector<RankValues> initial(world_size);
  for (uint32_t rank = 0; rank < world_size; ++rank) {
    hw::CallDescriptor& call = runs[rank].call;
    call.collective = run.collective;
    call.rank = rank;
    call.root = run.root;
    call.datatype = run.datatype;
    call.reduce_op = run.op;
    call.count = run.count;
    call.in_place = run.in_place && (!hw::HasRoot(run.collective) || rank == run.root);
    call.algorithm = std::string(run.algorithm);
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
    for (size_t slot = 0; slot < kResult + 1; ++slot) {
      const uint64_t elements =
          RequiredElements(call, world_size, static_cast<hw::Slot>(slot));
      Values& values = initial[rank][slot];
      runs[rank].buffers[slot].resize(elements * element_size);
      for (uint64_t i = 0; i < elements; ++i) {
        values.push_back(IsInput(call, slot, i) ? Draw(rng, run.datatype, run.op) : kSentinel);
        Encode(run.datatype, values.back(), runs[rank].buffers[slot].data() + i * element_size);
      }
    }
  }

  if (absl::Status executed = Execute(runs); !executed.ok()) {
    return absl::Status(executed.code(), absl::StrCat(what, executed.message()));
  }

  const std::vector<RankValues> expected = Reference(run, runs, initial);
  for (uint32_t rank = 0; rank < world_size; ++rank) {
    for (size_t slot = 0; slot < kResult + 1; ++slot) {
      for (size_t i = 0; i < expected[rank][slot].size(); ++i) {
        const double want = expected[rank][slot][i];
        if (std::isnan(want)) continue;
        const double got = Decode(run.datatype, runs[rank].buffers[slot].data() + i * element_size);
        if (got != want) {
          return absl::InternalError(absl::StrCat(what, "rank ", rank, " slot ", slot, " [", i,
                                                  "]: expected ", want, ", got ", got));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace cclo::firmware
