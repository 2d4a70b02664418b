#include "client/run/check.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "firmware/contract.h"
#include "hw/emu/reduce.h"

namespace cclo::run {
namespace {

// Where this rank's input goes: `count` elements from element `offset` of one buffer.
struct InputRegion {
  bool in_recv = false;
  uint64_t offset = 0;
  uint64_t count = 0;
};

InputRegion InputOf(const OpShape& shape) {
  const uint64_t n = shape.count;
  const uint64_t all = n * shape.size;
  const bool root = shape.rank == shape.root;
  switch (shape.op) {
    case Op::kSendRecv:
      return {false, 0, n};
    case Op::kBcast:
      return {true, 0, root ? n : 0};
    case Op::kScatter:
      return {shape.in_place, 0, root ? all : 0};
    case Op::kGather:
      return {shape.in_place, shape.in_place ? shape.root * n : 0, n};
    case Op::kAllgather:
      return {shape.in_place, shape.in_place ? shape.rank * n : 0, n};
    case Op::kReduce:
    case Op::kAllreduce:
      return {shape.in_place, 0, n};
    case Op::kReduceScatter:
    case Op::kAlltoall:
      return {shape.in_place, 0, all};
    case Op::kBarrier:
      break;
  }
  return {};
}

// Every rank's PatternValue at `index`, reduced with the shape's reduce op.
int64_t Reduced(const OpShape& shape, uint64_t index, uint64_t salt) {
  int64_t result = PatternValue(shape.datatype, 0, index, salt);
  for (uint32_t rank = 1; rank < shape.size; ++rank) {
    const int64_t value = PatternValue(shape.datatype, rank, index, salt);
    switch (shape.reduce_op) {
      case hw::ReduceOp::kMax:
        result = std::max(result, value);
        break;
      case hw::ReduceOp::kMin:
        result = std::min(result, value);
        break;
      case hw::ReduceOp::kProd:
        result *= value;
        break;
      case hw::ReduceOp::kSum:
        result += value;
        break;
    }
  }
  return result;
}

// Stores `value` as element `index` of `type` at `data` (8-bit integers wrap; float16 and
// bfloat16 round to nearest, exact for cclo-run's values).
void Store(hw::DataType type, void* data, uint64_t index, int64_t value) {
  auto put = [&](auto typed) {
    std::memcpy(static_cast<std::byte*>(data) + index * sizeof(typed), &typed, sizeof(typed));
  };
  switch (type) {
    case hw::DataType::kInt8:
      return put(static_cast<int8_t>(value));
    case hw::DataType::kUint8:
      return put(static_cast<uint8_t>(value));
    case hw::DataType::kInt32:
      return put(static_cast<int32_t>(value));
    case hw::DataType::kInt64:
      return put(value);
    case hw::DataType::kFloat16:
      return put(hw::emu::FloatToHalf(static_cast<float>(value)));
    case hw::DataType::kBfloat16:
      return put(hw::emu::FloatToBfloat(static_cast<float>(value)));
    case hw::DataType::kFloat32:
      return put(static_cast<float>(value));
    case hw::DataType::kFloat64:
      return put(static_cast<double>(value));
  }
}

// Element `index` of `type` at `data`, exactly (every element type fits a double but int64
// beyond 2^53, which cclo-run never produces).
double Load(hw::DataType type, const void* data, uint64_t index) {
  auto get = [&](auto typed) {
    std::memcpy(&typed, static_cast<const std::byte*>(data) + index * sizeof(typed), sizeof(typed));
    return typed;
  };
  switch (type) {
    case hw::DataType::kInt8:
      return get(int8_t{});
    case hw::DataType::kUint8:
      return get(uint8_t{});
    case hw::DataType::kInt32:
      return get(int32_t{});
    case hw::DataType::kInt64:
      return static_cast<double>(get(int64_t{}));
    case hw::DataType::kFloat16:
      return hw::emu::HalfToFloat(get(uint16_t{}));
    case hw::DataType::kBfloat16:
      return hw::emu::BfloatToFloat(get(uint16_t{}));
    case hw::DataType::kFloat32:
      return get(float{});
    case hw::DataType::kFloat64:
      return get(double{});
  }
  return 0;
}

// `value` as `type` holds it (8-bit integers wrapped).
double Represented(hw::DataType type, int64_t value) {
  std::byte element[8];
  Store(type, element, 0, value);
  return Load(type, element, 0);
}

std::string Text(double value) { return absl::StrFormat("%.17g", value); }

}  // namespace

int64_t PatternValue(hw::DataType type, uint32_t rank, uint64_t index, uint64_t salt) {
  const int64_t value = static_cast<int64_t>((uint64_t{rank} * 31 + index * 7 + salt * 13) % 61);
  return type == hw::DataType::kUint8 ? value : value - 30;
}

int64_t Sentinel(hw::DataType type) {
  switch (type) {
    case hw::DataType::kInt8:
      return -128;
    case hw::DataType::kUint8:
      return 255;
    case hw::DataType::kFloat16:
      return int64_t{1} << 14;
    default:
      return int64_t{1} << 20;
  }
}

bool ShapeInPlace(Op op, uint32_t rank, uint32_t root, bool in_place) {
  const hw::Collective collective = CollectiveOf(op);
  if (!in_place || op == Op::kSendRecv || !hw::HasInPlace(collective)) return false;
  return !hw::HasRoot(collective) || rank == root;
}

BufferElements ElementsOf(const OpShape& shape) {
  if (shape.op == Op::kSendRecv) return {shape.count, shape.count};
  hw::CallDescriptor call;
  call.collective = CollectiveOf(shape.op);
  call.rank = shape.rank;
  call.root = shape.root;
  call.count = shape.count;
  call.in_place = shape.in_place;
  return {firmware::RequiredElements(call, shape.size, hw::Slot::kOp0),
          firmware::RequiredElements(call, shape.size, hw::Slot::kResult)};
}

uint64_t OutputCount(const OpShape& shape) {
  // In place, reduce_scatter reads size * count elements of recv but writes only count.
  if (shape.op == Op::kReduceScatter) return shape.count;
  return ElementsOf(shape).recv;
}

int64_t ExpectedValue(const OpShape& shape, uint64_t index, uint64_t salt) {
  const uint64_t n = std::max<uint64_t>(shape.count, 1);
  const hw::DataType type = shape.datatype;
  switch (shape.op) {
    case Op::kSendRecv:
      return PatternValue(type, (shape.rank + shape.size - 1) % shape.size, index, salt);
    case Op::kBcast:
      return PatternValue(type, shape.root, index, salt);
    case Op::kScatter:
      // In place the root's buffer keeps every chunk; elsewhere a rank gets its own chunk.
      return PatternValue(type, shape.root, shape.in_place ? index : shape.rank * n + index, salt);
    case Op::kGather:
    case Op::kAllgather:
      return PatternValue(type, static_cast<uint32_t>(index / n), index % n, salt);
    case Op::kReduce:
    case Op::kAllreduce:
      return Reduced(shape, index, salt);
    case Op::kReduceScatter:
      return Reduced(shape, shape.rank * n + index, salt);
    case Op::kAlltoall:
      return PatternValue(type, static_cast<uint32_t>(index / n), shape.rank * n + index % n, salt);
    case Op::kBarrier:
      break;
  }
  return 0;
}

void FillBuffers(const OpShape& shape, uint64_t salt, void* send, void* recv) {
  FillValue(shape.datatype, recv, ElementsOf(shape).recv, Sentinel(shape.datatype));
  const InputRegion input = InputOf(shape);
  void* target = input.in_recv ? recv : send;
  for (uint64_t i = 0; i < input.count; ++i) {
    Store(shape.datatype, target, input.offset + i,
          PatternValue(shape.datatype, shape.rank, i, salt));
  }
}

void FillValue(hw::DataType type, void* data, uint64_t count, int64_t value) {
  for (uint64_t i = 0; i < count; ++i) Store(type, data, i, value);
}

std::optional<Mismatch> FindMismatch(const OpShape& shape, const void* recv, uint64_t salt) {
  const uint64_t count = OutputCount(shape);
  for (uint64_t i = 0; i < count; ++i) {
    const double expected = Represented(shape.datatype, ExpectedValue(shape, i, salt));
    const double got = Load(shape.datatype, recv, i);
    if (got != expected) return Mismatch{i, Text(expected), Text(got)};
  }
  return std::nullopt;
}

}  // namespace cclo::run
