#include "client/run/check.h"

#include <algorithm>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cclo::run {
namespace {

// Calls `body` with a null pointer of the C++ type of `type` (one of cclo-run's datatypes).
template <typename Body>
auto Dispatch(hw::DataType type, Body body) {
  switch (type) {
    case hw::DataType::kInt32:
      return body(static_cast<int32_t*>(nullptr));
    case hw::DataType::kInt64:
      return body(static_cast<int64_t*>(nullptr));
    case hw::DataType::kFloat64:
      return body(static_cast<double*>(nullptr));
    default:
      return body(static_cast<float*>(nullptr));
  }
}

// An element as text, floating point with every significant digit.
template <typename T>
std::string Text(T value) {
  if constexpr (std::is_same_v<T, float>) return absl::StrFormat("%.9g", value);
  if constexpr (std::is_same_v<T, double>) return absl::StrFormat("%.17g", value);
  return absl::StrCat(value);
}

}  // namespace

int64_t PatternValue(uint32_t rank, uint64_t index, uint64_t salt) {
  return static_cast<int64_t>((uint64_t{rank} * 31 + index * 7 + salt * 13) % 61) - 30;
}

int64_t ExpectedValue(const OpShape& shape, uint64_t index, uint64_t salt) {
  switch (shape.op) {
    case Op::kSendRecv:
      return PatternValue((shape.rank + shape.size - 1) % shape.size, index, salt);
    case Op::kBcast:
      return PatternValue(shape.root, index, salt);
    case Op::kAllreduce:
      break;
  }
  int64_t result = PatternValue(0, index, salt);
  for (uint32_t rank = 1; rank < shape.size; ++rank) {
    const int64_t value = PatternValue(rank, index, salt);
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

void FillPattern(hw::DataType type, void* data, uint64_t count, uint32_t rank, uint64_t salt) {
  Dispatch(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    T* out = static_cast<T*>(data);
    for (uint64_t i = 0; i < count; ++i) out[i] = static_cast<T>(PatternValue(rank, i, salt));
  });
}

void FillValue(hw::DataType type, void* data, uint64_t count, int64_t value) {
  Dispatch(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    std::fill_n(static_cast<T*>(data), count, static_cast<T>(value));
  });
}

std::optional<Mismatch> FindMismatch(hw::DataType type, const void* data, uint64_t count,
                                     const OpShape& shape, uint64_t salt) {
  return Dispatch(type, [&](auto* typed) -> std::optional<Mismatch> {
    using T = std::remove_pointer_t<decltype(typed)>;
    const T* in = static_cast<const T*>(data);
    for (uint64_t i = 0; i < count; ++i) {
      const T expected = static_cast<T>(ExpectedValue(shape, i, salt));
      if (in[i] != expected) return Mismatch{i, Text(expected), Text(in[i])};
    }
    return std::nullopt;
  });
}

}  // namespace cclo::run
