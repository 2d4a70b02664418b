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

/// --ops, --sizes, --warmup, --iters and --check as given.
struct RankArguments {
  std::string ops;
  std::string sizes;
  uint32_t warmup = 0;
  uint32_t iters = 1;
  bool check = false;
};

/// Adds the options to `app` (all required but the flag --check).
void AddRankOptions(CLI::App& app, RankArguments& arguments);

/// What a rank program's stack provides.
struct RankStack {
  uint32_t rank = 0;
  uint32_t ranks = 1;
  /// The buffers `run` reads and writes, of MostElements elements each: with --check, filled
  /// before and checked after every timed run.
  float* send = nullptr;
  float* recv = nullptr;
  /// Runs `op` once with `count` float32 elements per rank (CountOf).
  std::function<void(Op op, uint64_t count)> run;
  std::function<void()> barrier;
  /// Prints (or gathers, then prints) the TimesLine of one op and size.
  std::function<void(Op op, uint64_t size, const std::vector<double>& micros)> report;
};

/// The most float32 elements a buffer needs for any of `arguments`' sizes.
absl::StatusOr<uint64_t> MostElements(const RankArguments& arguments);

/// For each op and size: warmup runs, a barrier, iters timed runs, then report. With --check,
/// the inputs are filled before and the output is checked after each timed run (untimed), as
/// cclo-bench's ranks do (bench/check.h); a wrong result ends the sweep with an error naming
/// it, after its size's report.
absl::Status RunRankSweep(const RankArguments& arguments, const RankStack& stack);

}  // namespace cclo::bench
