// The loop of the baseline rank programs (mpi-bench, gloo-bench): their common arguments
// and the sweep over ops and sizes, timed as cclo-bench's workers time theirs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "bench/sweep.h"

namespace cclo::bench {

/// --ops, --sizes, --warmup and --iters as given.
struct RankArguments {
  std::string ops;
  std::string sizes;
  uint32_t warmup = 0;
  uint32_t iters = 1;
};

/// Adds the four options (all required) to `app`.
void AddRankOptions(CLI::App& app, RankArguments& arguments);

/// What a rank program's stack provides.
struct RankStack {
  uint32_t ranks = 1;
  /// Runs `op` once with `count` float32 elements per rank (CountOf).
  std::function<void(Op op, uint64_t count)> run;
  std::function<void()> barrier;
  /// Prints (or gathers, then prints) the TimesLine of one op and size.
  std::function<void(Op op, uint64_t size, const std::vector<double>& micros)> report;
};

/// The most float32 elements a buffer needs for any of `arguments`' sizes.
absl::StatusOr<uint64_t> MostElements(const RankArguments& arguments);

/// For each op and size: warmup runs, a barrier, iters timed runs, then report.
absl::Status RunRankSweep(const RankArguments& arguments, const RankStack& stack);

}  // namespace cclo::bench
