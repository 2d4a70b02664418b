// The stacks cclo-bench compares with, run on this machine in the same run (DESIGN 14).
#pragma once

#include "absl/status/statusor.h"
#include "bench/options.h"
#include "bench/sweep.h"

namespace cclo::bench {

/// The sweep of `options` (ops but nop, sizes, ranks, iterations) with Open MPI over TCP on
/// loopback: `mpirun --mca pml ob1 --mca btl self,tcp` running //bench:mpi-bench.
absl::StatusOr<Timings> RunMpiSweep(const BenchOptions& options);

/// The sweep of `options` restricted to allreduce (ring), bcast and allgather with Gloo
/// over TCP on loopback: a //bench:gloo-bench process per rank meeting in a file store.
absl::StatusOr<Timings> RunGlooSweep(const BenchOptions& options);

/// Bytes per second of one iperf3 stream on loopback with 1 MiB writes for `seconds`.
absl::StatusOr<double> RunLink(double seconds);

}  // namespace cclo::bench
