// What every program of cclo-bench shares: the ops, the sizes of a sweep, nccl-tests'
// bandwidth definitions, and the lines through which rank processes report their timings.
//
// Sizes are nccl-tests' "size": the bytes of the largest buffer of the op at one rank
// (allgather's output, reduce_scatter's input, alltoall's either, the message otherwise).
// algbw = size / time; busbw = algbw * BusFactor, the rate each rank's link would have to
// carry for an optimal algorithm, comparable across ops and world sizes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace cclo::bench {

/// The ops a sweep runs. kSendRecv: each rank sends to rank + 1 and receives from rank - 1
/// at once (nccl-tests' sendrecv). kSend: rank k sends to rank k + ranks / 2, one direction
/// only, one message at a time, each answered by an empty message (OSU's osu_bw with a
/// window of one; the last of an odd number of ranks sits out): the traffic of a one-way
/// link test. kNop: an op that does nothing, timing a round trip through the daemon by
/// libcclo's path, the session's command ring (no size). kNopGrpc: the same op through the
/// gRPC Submit and Wait RPCs of the same session.
enum class Op {
  kSendRecv,
  kSend,
  kBcast,
  kReduce,
  kAllreduce,
  kAllgather,
  kReduceScatter,
  kAlltoall,
  kNop,
  kNopGrpc
};

/// Name on the command line and in tables: "sendrecv", "reduce_scatter", ...
std::string OpName(Op op);

/// Whether `op` is a nop (kNop, kNopGrpc): it moves no data and has no size.
bool IsNop(Op op);

/// Parses a comma-separated list of op names, or "all" (every op in the order of Op).
absl::StatusOr<std::vector<Op>> ParseOps(const std::string& text);

/// nccl-tests' bus bandwidth factor of `op` over `ranks` ranks: allreduce 2(n-1)/n,
/// allgather, reduce_scatter and alltoall (n-1)/n, the others 1.
double BusFactor(Op op, uint32_t ranks);

/// Elements each rank passes as the op's count (MPI count) for a size of `bytes`, in
/// elements of `element_bytes`; 0 when the size is too small for `ranks`.
uint64_t CountOf(Op op, uint64_t bytes, uint32_t ranks, uint64_t element_bytes);

/// The distinct counts `op` runs with over `sizes` (those too small for `ranks` left out;
/// nops: a single 0).
std::vector<uint64_t> CountsOf(Op op, const std::vector<uint64_t>& sizes, uint32_t ranks,
                               uint64_t element_bytes);

/// The size an op with `count` elements per rank actually has (CountOf's inverse).
uint64_t SizeOf(Op op, uint64_t count, uint32_t ranks, uint64_t element_bytes);

/// Parses the comma-separated decimal sizes a rank program is given, e.g. "8,16,32".
absl::StatusOr<std::vector<uint64_t>> ParseSizeList(const std::string& text);

/// min_bytes, min_bytes * factor, ... up to max_bytes (1 <= min <= max, factor >= 2).
std::vector<uint64_t> SweepSizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor);

/// The value below which `fraction` of `values` lie (nearest rank); 0 when empty.
double Percentile(std::vector<double> values, double fraction);

/// "times <op> <size> <us> <us> ...": one rank's time of every timed iteration.
std::string TimesLine(Op op, uint64_t size, const std::vector<double>& micros);

/// Per op and size, the time of each iteration: the slowest rank's (an op ends for the
/// application when its last rank is done).
using Timings = std::map<std::pair<Op, uint64_t>, std::vector<double>>;

/// Adds every "times" line of one or more processes' `output` to `timings`, keeping per
/// iteration the largest time. Errors name the malformed line.
absl::Status AddTimes(const std::string& output, Timings& timings);

}  // namespace cclo::bench
