// The data cclo-run puts into buffers and the results it expects back.
//
// Every rank fills element i of its input with PatternValue(rank, i, salt): a small integer
// in [-30, 30], so that sums over thousands of ranks stay exact in float32. The salt changes
// with every op run, so a stale result from an earlier run never passes. Outputs are first
// filled with kSentinel, a value no op can produce here, so an element left unwritten shows.
// Datatypes are those cclo-run accepts: int32, int64, float32, float64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "client/run/options.h"
#include "hw/types.h"

namespace cclo::run {

/// Fill value of outputs before an op (2^20: exact in every datatype cclo-run uses).
inline constexpr int64_t kSentinel = int64_t{1} << 20;

/// The input element `index` of `rank` for the op run numbered `salt`.
int64_t PatternValue(uint32_t rank, uint64_t index, uint64_t salt);

/// Who takes part in an op and how, as the reference needs it.
struct OpShape {
  Op op = Op::kAllreduce;
  uint32_t rank = 0;
  uint32_t size = 1;
  uint32_t root = 0;                            ///< bcast
  hw::ReduceOp reduce_op = hw::ReduceOp::kSum;  ///< allreduce
};

/// The element `index` that `shape.rank` must hold after the op run numbered `salt`.
int64_t ExpectedValue(const OpShape& shape, uint64_t index, uint64_t salt);

/// Writes PatternValue(rank, i, salt) as `type` to the `count` elements at `data`.
void FillPattern(hw::DataType type, void* data, uint64_t count, uint32_t rank, uint64_t salt);

/// Writes `value` as `type` to the `count` elements at `data`.
void FillValue(hw::DataType type, void* data, uint64_t count, int64_t value);

/// The first element that differs from the reference.
struct Mismatch {
  uint64_t index = 0;
  std::string expected;
  std::string got;
};

/// Compares the `count` elements of `type` at `data` with ExpectedValue(shape, i, salt).
std::optional<Mismatch> FindMismatch(hw::DataType type, const void* data, uint64_t count,
                                     const OpShape& shape, uint64_t salt);

}  // namespace cclo::run
