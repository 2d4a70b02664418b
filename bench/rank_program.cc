#include "bench/rank_program.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace cclo::bench {

void AddRankOptions(CLI::App& app, RankArguments& arguments) {
  app.add_option("--ops", arguments.ops, "comma-separated ops")->required();
  app.add_option("--sizes", arguments.sizes, "comma-separated sizes in bytes")->required();
  app.add_option("--warmup", arguments.warmup, "untimed runs per size")->required();
  app.add_option("--iters", arguments.iters, "timed runs per size")->required();
}

absl::StatusOr<uint64_t> MostElements(const RankArguments& arguments) {
  absl::StatusOr<std::vector<uint64_t>> sizes = ParseSizeList(arguments.sizes);
  if (!sizes.ok()) return sizes.status();
  return std::max<uint64_t>(1, *std::max_element(sizes->begin(), sizes->end()) / sizeof(float));
}

absl::Status RunRankSweep(const RankArguments& arguments, const RankStack& stack) {
  absl::StatusOr<std::vector<Op>> ops = ParseOps(arguments.ops);
  if (!ops.ok()) return ops.status();
  absl::StatusOr<std::vector<uint64_t>> sizes = ParseSizeList(arguments.sizes);
  if (!sizes.ok()) return sizes.status();
  for (Op op : *ops) {
    for (uint64_t count : CountsOf(op, *sizes, stack.ranks, sizeof(float))) {
      for (uint32_t i = 0; i < arguments.warmup; ++i) stack.run(op, count);
      stack.barrier();
      std::vector<double> micros;
      for (uint32_t i = 0; i < arguments.iters; ++i) {
        const absl::Time start = absl::Now();
        stack.run(op, count);
        micros.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      }
      stack.report(op, SizeOf(op, count, stack.ranks, sizeof(float)), micros);
    }
  }
  return absl::OkStatus();
}

}  // namespace cclo::bench
