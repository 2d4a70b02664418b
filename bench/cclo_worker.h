// One rank of a cclo-bench sweep: a client process of the local cclod.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/sweep.h"
#include "hw/types.h"

namespace cclo::bench {

/// What one rank runs; every rank of the communicator gets the same but its rank.
struct WorkerOptions {
  std::string runtime_dir;
  std::string token;
  uint32_t rank = 0;
  uint32_t size = 1;
  std::vector<Op> ops;
  std::vector<uint64_t> sizes;  ///< nccl-tests sizes (sweep.h)
  uint32_t warmup = 0;
  uint32_t iters = 1;
  bool check = false;
  hw::DataType datatype = hw::DataType::kFloat32;
  /// Forced on the collective ops (bcast to alltoall); empty: the daemons' choice.
  std::string algorithm;
  /// Rank 0 reads their CPU time around each size's timed iterations.
  std::vector<pid_t> daemon_pids;
  absl::Duration op_timeout = absl::Minutes(2);
};

/// Joins the communicator and runs every op at every size (in `datatype`, reductions sum;
/// rooted ops at root 0): `warmup` untimed iterations, a barrier, `iters` timed ones, a barrier.
/// Nops (nop, nop_grpc) instead run in turns, one rank at a time while the others wait in a
/// barrier: a barrier, then per rank its warm-up and timed iterations and a barrier. Prints per op
/// and size a TimesLine; with `check`, fills the inputs before and checks the output after
/// every iteration (outside the timing) and prints "check <op> <size> ok" or
/// "check <op> <size> <first mismatch>" (nops, without an output, print none); rank 0
/// prints "cpu <op> <size> <seconds>", the CPU time the daemons used between the first
/// barrier after the warm-up (nops: before the first turn) and the last barrier. Sizes too
/// small for the world size are skipped. A failed op ends the run with its error; a mismatch
/// does not.
absl::Status RunWorker(const WorkerOptions& options);

}  // namespace cclo::bench
