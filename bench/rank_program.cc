#include "bench/rank_program.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/check.h"
#include "client/run/check.h"
#include "hw/types.h"

namespace cclo::bench {

void AddRankOptions(CLI::App& app, RankArguments& arguments) {
  app.add_option("--ops", arguments.ops, "comma-separated ops")->required();
  app.add_option("--sizes", arguments.sizes, "comma-separated sizes in bytes")->required();
  app.add_option("--warmup", arguments.warmup, "untimed runs per size")->required();
  app.add_option("--iters", arguments.iters, "timed runs per size")->required();
  app.add_flag("--check", arguments.check, "check every timed run's result (untimed)");
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
  uint64_t salt = 0;
  for (Op op : *ops) {
    for (uint64_t count : CountsOf(op, *sizes, stack.ranks, sizeof(float))) {
      const hw::DataType float32 = hw::DataType::kFloat32;
      const run::OpShape filled = FillShape(op, float32, stack.rank, stack.ranks, count);
      const std::optional<run::OpShape> expected =
          arguments.check ? CheckShape(op, float32, stack.rank, stack.ranks, count) : std::nullopt;
      std::optional<run::Mismatch> mismatch;
      for (uint32_t i = 0; i < arguments.warmup; ++i) stack.run(op, count);
      stack.barrier();
      std::vector<double> micros;
      for (uint32_t i = 0; i < arguments.iters; ++i) {
        if (arguments.check) run::FillBuffers(filled, ++salt, stack.send, stack.recv);
        const absl::Time start = absl::Now();
        stack.run(op, count);
        micros.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
        if (expected && !mismatch) mismatch = run::FindMismatch(*expected, stack.recv, salt);
      }
      const uint64_t size = SizeOf(op, count, stack.ranks, sizeof(float));
      stack.report(op, size, micros);
      if (mismatch) {
        return absl::DataLossError(
            absl::StrCat(OpName(op), " ", size, ": ", MismatchText(stack.rank, *mismatch)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace cclo::bench
