#include "bench/cclo_sweep.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cclo/client.h"
#include "hw/types.h"
#include "tests/e2e/cluster.h"

namespace cclo::bench {
namespace {

absl::StatusOr<std::string> NewToken(const std::string& runtime_dir) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(runtime_dir);
  if (!client.ok()) return client.status();
  return (*client)->CreateCommunicatorId();
}

// Reads the "cpu" and "check" lines of one rank's `output` into `results`.
absl::Status AddReports(const std::string& output, CcloResults& results) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    const bool cpu = absl::StartsWith(line, "cpu ");
    if (!cpu && !absl::StartsWith(line, "check ")) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, absl::MaxSplits(' ', 3));
    absl::StatusOr<std::vector<Op>> op = ParseOps(std::string(words.size() > 1 ? words[1] : ""));
    uint64_t size = 0;
    double seconds = 0;
    if (words.size() < 4 || !op.ok() || op->size() != 1 || !absl::SimpleAtoi(words[2], &size) ||
        (cpu && !absl::SimpleAtod(words[3], &seconds))) {
      return absl::InternalError(absl::StrCat("malformed worker line '", line, "'"));
    }
    const std::pair<Op, uint64_t> key = {op->front(), size};
    if (cpu) {
      results.cpu_seconds[key] = seconds;
    } else {
      KeepCheck(results.checks[key], std::string(words[3]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void KeepCheck(std::string& kept, std::string check) {
  if (kept.empty() || kept == "ok") kept = std::move(check);
}

absl::StatusOr<CcloResults> RunCcloSweep(const BenchOptions& options,
                                         const std::vector<std::string>& runtime_dirs,
                                         const std::vector<pid_t>& daemon_pids,
                                         const std::string& worker_binary) {
  absl::StatusOr<std::string> token = NewToken(runtime_dirs[0]);
  if (!token.ok()) return token.status();
  std::vector<std::string> ops;
  for (Op op : options.ops) ops.push_back(OpName(op));
  std::vector<std::vector<std::string>> commands;
  for (uint32_t rank = 0; rank < options.ranks(); ++rank) {
    std::vector<std::string> command = {
        worker_binary,   "worker",
        "--runtime-dir", runtime_dirs[rank / options.ranks_per_daemon],
        "--token",       *token,
        "--rank",        absl::StrCat(rank),
        "--size",        absl::StrCat(options.ranks()),
        "--ops",         absl::StrJoin(ops, ","),
        "--sizes",       absl::StrJoin(options.sizes, ","),
        "--warmup",      absl::StrCat(options.warmup),
        "--iters",       absl::StrCat(options.iters),
        "--datatype",    std::string(hw::DataTypeName(options.datatype)),
        "--daemon-pids", absl::StrJoin(daemon_pids, ",")};
    if (options.check) command.push_back("--check");
    if (!options.algorithm.empty()) {
      command.insert(command.end(), {"--algorithm", options.algorithm});
    }
    commands.push_back(std::move(command));
  }
  std::vector<testing::ProcessResult> ranks = testing::RunAll(commands, options.deadline);
  std::string failures;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    if (ranks[rank].exit_code == 0) continue;
    absl::StrAppend(&failures, failures.empty() ? "" : "\n", "rank ", rank,
                    ranks[rank].timed_out ? " passed the deadline" : " failed", " (exit code ",
                    ranks[rank].exit_code, "):\n",
                    absl::StripTrailingAsciiWhitespace(ranks[rank].output));
  }
  if (!failures.empty()) return absl::InternalError(failures);
  CcloResults results;
  for (const testing::ProcessResult& rank : ranks) {
    if (absl::Status status = AddTimes(rank.output, results.timings); !status.ok()) return status;
    if (absl::Status status = AddReports(rank.output, results); !status.ok()) return status;
  }
  return results;
}

}  // namespace cclo::bench
