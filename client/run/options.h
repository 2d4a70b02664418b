// What `cclo-run run` does, and the parsing of its arguments into that.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hw/types.h"

namespace cclo::run {

/// The ops cclo-run can check.
enum class Op {
  kSendRecv,       ///< every rank sends to rank + 1 and receives from rank - 1 (ring; size >= 2)
  kBcast,          ///< from the root to all ranks
  kScatter,        ///< the root's chunk i to rank i
  kGather,         ///< rank i's input to chunk i at the root
  kAllgather,      ///< rank i's input to chunk i at every rank
  kReduce,         ///< over all ranks' inputs, to the root
  kAllreduce,      ///< over all ranks' inputs, to every rank
  kReduceScatter,  ///< over all ranks' inputs, chunk i to rank i
  kAlltoall,       ///< chunk j of rank i to chunk i of rank j
  kBarrier,        ///< no data; completes once every rank entered it
};

/// Every op, in the order `--ops all` runs them.
inline constexpr Op kOps[] = {Op::kSendRecv,  Op::kBcast,  Op::kScatter,   Op::kGather,
                              Op::kAllgather, Op::kReduce, Op::kAllreduce, Op::kReduceScatter,
                              Op::kAlltoall,  Op::kBarrier};

/// Every datatype: the patterns are small integers, exact in each (see check.h).
inline constexpr hw::DataType kRunDataTypes[] = {hw::DataType::kInt8,    hw::DataType::kUint8,
                                                 hw::DataType::kInt32,   hw::DataType::kInt64,
                                                 hw::DataType::kFloat16, hw::DataType::kBfloat16,
                                                 hw::DataType::kFloat32, hw::DataType::kFloat64};

/// Name on the command line and in the table, e.g. "sendrecv", "reduce_scatter".
std::string OpName(Op op);

/// The engine collective of `op` (sendrecv: the receive, whose output is checked).
hw::Collective CollectiveOf(Op op);

/// `--algorithm all`: every registered algorithm of each op in turn.
inline constexpr char kEveryAlgorithm[] = "all";

/// A validated `cclo-run run` invocation.
struct RunOptions {
  std::string runtime_dir;
  std::string token;
  uint32_t rank = 0;
  uint32_t size = 1;
  std::vector<Op> ops;
  std::vector<uint64_t> sizes;  ///< bytes per rank (MPI count times element size), as given
  std::vector<hw::DataType> datatypes = {hw::DataType::kFloat32};  ///< each op runs in each
  hw::ReduceOp reduce_op = hw::ReduceOp::kSum;
  uint32_t iters = 1;
  std::vector<uint32_t> roots = {0};  ///< rooted ops run once per root, in this order
  bool in_place = false;              ///< the in-place form of every op that has one
  /// Empty: the daemon's choice; a name: forced for every op but sendrecv; kEveryAlgorithm:
  /// each op once per algorithm the registry has for it (sendrecv included).
  std::string algorithm;
  absl::Duration join_timeout = absl::Seconds(60);
  absl::Duration op_timeout = absl::ZeroDuration();  ///< zero: the daemon's default
  bool table = false;
};

/// `cclo-run run` arguments as given, before validation.
struct RunArguments {
  std::string runtime_dir;
  std::string token;
  int64_t rank = -1;
  int64_t size = -1;
  std::string ops = "sendrecv,bcast,allreduce";
  std::string sizes = "1K,64K,1M";
  std::string datatype = "float32";  ///< one name or a comma-separated list
  std::string reduce_op = "sum";
  int64_t iters = 1;
  std::string root = "0";
  bool in_place = false;
  std::string algorithm;
  double join_timeout_seconds = 60;
  double op_timeout_seconds = 0;
  bool table = false;
};

/// Parses a comma-separated list of byte sizes (hw::ParseByteSize), e.g. "1K,64K,1M,16M".
absl::StatusOr<std::vector<uint64_t>> ParseByteSizes(const std::string& text);

/// Parses a comma-separated list of op names, e.g. "sendrecv,allreduce", or "all" (every
/// op in the order of Op).
absl::StatusOr<std::vector<Op>> ParseOps(const std::string& text);

/// Parses --root: a rank below `size`, or "all" (every rank in turn).
absl::StatusOr<std::vector<uint32_t>> ParseRoots(const std::string& text, uint32_t size);

/// Parses --datatype: a comma-separated list of datatype names, e.g. "float32,int32".
absl::StatusOr<std::vector<hw::DataType>> ParseDataTypes(const std::string& text);

/// OK when sums of the check patterns (check.h) over `ranks` ranks stay exact in `type`;
/// else INVALID_ARGUMENT "<type> sums over <ranks> ranks may exceed <limit>, beyond which
/// <type> misses integers; use at most <n> ranks" (float16 and bfloat16 have limits).
absl::Status CheckSumsExact(hw::DataType type, uint32_t ranks);

/// Checks every argument and combination; errors name the flag and the bad value.
absl::StatusOr<RunOptions> ValidateRunArguments(const RunArguments& arguments);

/// The algorithms `op` runs with, in turn: "" (the daemon's choice) unless one is forced;
/// with kEveryAlgorithm each one the registry has for the op's collective (for sendrecv,
/// those of recv, forced on the send and the receive alike).
std::vector<std::string> AlgorithmsOf(const RunOptions& options, Op op);

/// The roots `op` runs with: every one of options.roots if it is rooted, else only "none".
std::vector<std::optional<uint32_t>> RootsOf(const RunOptions& options, Op op);

/// The bytes per rank `op` runs at in `datatype`: options.sizes rounded down to whole
/// elements; a barrier moves no data, so it runs once, at 0 bytes.
std::vector<uint64_t> SizesOf(const RunOptions& options, Op op, hw::DataType datatype);

}  // namespace cclo::run
