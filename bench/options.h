// cclo-bench's command line, validated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/sweep.h"
#include "hw/types.h"

namespace cclo::bench {

/// The stacks a sweep is compared with, in the same run.
enum class Baseline {
  kMpi,   ///< Open MPI over TCP (btl self,tcp), the same ops, sizes and world size
  kGloo,  ///< Gloo over TCP: allreduce (ring), bcast and allgather
  kLink,  ///< iperf3, one stream on loopback, 1 MiB writes
};

/// "mpi", "gloo" or "link".
std::string BaselineName(Baseline baseline);

/// A validated cclo-bench invocation.
struct BenchOptions {
  std::vector<Op> ops;
  std::vector<uint64_t> sizes;
  uint32_t daemons = 2;
  uint32_t ranks_per_daemon = 1;
  /// Running daemons to join; empty: start `daemons` daemons on loopback.
  std::vector<std::string> runtime_dirs;
  /// data_tcp_congestion of the daemons started here; empty: the host's.
  std::string data_tcp_congestion;
  uint32_t warmup = 5;
  uint32_t iters = 20;
  /// Each stack's sweep runs this many times, the stacks in turn (ours, then each
  /// baseline); the timed iterations of every round are pooled.
  uint32_t rounds = 1;
  bool check = false;
  /// Of every op's elements (reductions sum); Open MPI and Gloo run float32 only.
  hw::DataType datatype = hw::DataType::kFloat32;
  /// Forced on every collective op (bcast to alltoall); empty: the daemons' choice.
  std::string algorithm;
  std::vector<Baseline> baselines;
  double link_seconds = 5;
  /// Each stack's whole sweep must end by then; its processes are killed past it.
  absl::Duration deadline = absl::Minutes(30);

  uint32_t ranks() const { return daemons * ranks_per_daemon; }
};

/// The command line as given.
struct BenchArguments {
  std::string ops = "all";
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  uint64_t step_factor = 2;
  int64_t daemons = -1;  ///< -1: 2, or as many as --runtime-dirs names
  int64_t ranks_per_daemon = 1;
  std::optional<std::string> runtime_dirs;  ///< unset: start daemons
  std::string data_tcp_congestion;
  int64_t warmup = 5;
  int64_t iters = 20;
  int64_t rounds = 1;
  bool check = false;
  std::string datatype = "float32";
  std::string algorithm;
  std::vector<std::string> baselines;
  double link_seconds = 5;
  double deadline_seconds = 1800;
};

/// Checks every argument and combination; errors name the flag and the bad value.
absl::StatusOr<BenchOptions> ValidateBenchArguments(const BenchArguments& arguments);

}  // namespace cclo::bench
