// The data cclo-run puts into buffers and the results it expects back.
//
// Every rank fills element i of its input with PatternValue(type, rank, i, salt): a small
// integer (in [-30, 30], or [0, 60] for uint8), exact in every datatype, so that the
// reference is exact: integer sums wrap in the reference as in the engine, and float16 and
// bfloat16 sums stay exact while 30 * ranks fits their integers (options.cc checks). The
// salt changes with every op run, so a stale result from an earlier run never passes.
// Before an op, the output is filled with Sentinel(type), a value no op of a small world
// produces, so an element left unwritten shows. Where the input and output sit in the two
// buffers follows firmware/contract.h, in place included; each rank computes every rank's
// inputs locally, so it checks its own output without exchanging anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "client/run/options.h"
#include "hw/types.h"

namespace cclo::run {

/// The input element `index` of `rank` for the op run numbered `salt`, as an integer.
int64_t PatternValue(hw::DataType type, uint32_t rank, uint64_t index, uint64_t salt);

/// Fill value of outputs before an op: -128 for int8, 255 for uint8, 2^14 for float16, 2^20
/// otherwise; exact in its type and beyond every result of up to 4 ranks (8-bit sums over
/// more ranks wrap and may hit it, so an unwritten element could pass there).
int64_t Sentinel(hw::DataType type);

/// Who takes part in an op and how, as the reference needs it.
struct OpShape {
  Op op = Op::kAllreduce;
  hw::DataType datatype = hw::DataType::kFloat32;
  uint32_t rank = 0;
  uint32_t size = 1;
  uint32_t root = 0;                            ///< rooted ops
  hw::ReduceOp reduce_op = hw::ReduceOp::kSum;  ///< reducing ops
  uint64_t count = 0;                           ///< elements per rank (MPI count)
  bool in_place = false;                        ///< this rank runs the in-place form (ShapeInPlace)
};

/// Whether `rank` runs the in-place form of `op` when in place was asked for: only ops that
/// have one, and for rooted ops only the root.
bool ShapeInPlace(Op op, uint32_t rank, uint32_t root, bool in_place);

/// Elements of each buffer an op of `shape` touches at this rank.
struct BufferElements {
  uint64_t send = 0;
  uint64_t recv = 0;
};
BufferElements ElementsOf(const OpShape& shape);

/// Elements of the receive buffer that hold this rank's result and are checked.
uint64_t OutputCount(const OpShape& shape);

/// The result element `index` of the receive buffer after the op run numbered `salt`, as
/// an integer before conversion to the datatype (which wraps 8-bit integers).
int64_t ExpectedValue(const OpShape& shape, uint64_t index, uint64_t salt);

/// Prepares the op run numbered `salt`: fills the receive buffer's used elements with the
/// sentinel, then writes this rank's input where the op reads it (send or, in place or for
/// the bcast root, recv).
void FillBuffers(const OpShape& shape, uint64_t salt, void* send, void* recv);

/// Writes `value` as `type` to the `count` elements at `data`.
void FillValue(hw::DataType type, void* data, uint64_t count, int64_t value);

/// The first element that differs from the reference.
struct Mismatch {
  uint64_t index = 0;
  std::string expected;
  std::string got;
};

/// Compares the OutputCount(shape) elements at `recv` with ExpectedValue(shape, i, salt).
std::optional<Mismatch> FindMismatch(const OpShape& shape, const void* recv, uint64_t salt);

}  // namespace cclo::run
