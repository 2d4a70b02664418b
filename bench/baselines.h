// The stacks cclo-bench compares with, run on this machine in the same run (DESIGN 14).
#pragma once

#include "absl/status/statusor.h"
#include "bench/options.h"
#include "bench/sweep.h"

namespace cclo::bench {

/// The sweep of `options` (ops but nop, sizes, ranks, iterations, --check) with Open MPI over
/// TCP on loopback: `mpirun --mca pml ob1 --mca btl self,tcp` running //bench:mpi-bench. A
/// wrong result (with --check) is an error naming it.
absl::StatusOr<Timings> RunMpiSweep(const BenchOptions& options);

/// The sweep of `options` restricted to allreduce (ring), bcast and allgather with Gloo
/// over TCP on loopback: a //bench:gloo-bench process per rank meeting in a file store. A
/// wrong result (with --check) is an error naming it.
absl::StatusOr<Timings> RunGlooSweep(const BenchOptions& options);

/// iperf3 on loopback with 1 MiB writes, in bytes per second.
struct LinkRates {
  double one_way = 0;  ///< one stream
  /// One stream each way at once (--bidir), per direction: the link of an op in which
  /// every rank sends and receives at the same time (sendrecv, the ring algorithms), whose
  /// two directions share the same cores on loopback.
  double duplex = 0;
};

/// Runs iperf3 one way for `seconds`, then both ways at once for `seconds`.
absl::StatusOr<LinkRates> RunLink(double seconds);

}  // namespace cclo::bench
