// The collective matrix of issue #3 across real cclod daemons and real cclo-run processes.
//
// Worlds: sizes 2 to 8, each with one rank per daemon and with two ranks per daemon (rank r
// on daemon r / 2; an odd size leaves the last daemon with one rank), so transfers go over
// the engines' TCP sessions and, in the second layout, also through their local path. Each
// world starts its daemons once and runs three rounds of one cclo-run process per rank:
// every op (sendrecv and every collective) with every algorithm the registry has for it,
// forced (`--algorithm all`), in float32 and int32; the same in float16; and every op in
// float64 with the daemon's default selection. Rooted ops run with every root in turn.
//
// Sizes: the daemons run with segment_bytes S = 16384 and eager_max_bytes E = 4096, and
// every round runs at 0, e, E - e, E, E + e, S - e, S, S + e and 8 (S + e) bytes per rank
// (e: the element size of the round's datatypes). Those are what one rank sends or receives
// (the MPI count), so the plain per-rank messages straddle both boundaries by one element:
// sendrecv, bcast one_to_all and binomial_tree, scatter and gather one_to_all and ring
// chunks, allgather ring and reduce_scatter ring steps, reduce all_to_one and binary_tree,
// allreduce recursive_doubling and alltoall chunks carry exactly that many bytes. Other
// messages are cut differently (allreduce ring chunks are count / P, tree scatters and
// gathers merge subtrees' chunks, recursive doubling allgather doubles them, bcast chain
// and reduce ring pipeline ~64 KiB pieces); the largest size still puts count / P past S
// for every P <= 8 and gives the pipelines several pieces.
//
// Checks: cclo-run compares each rank's output with a reference it computes locally
// (client/run/check.h) and exits non-zero on an op error or a mismatch; every rank prints
// its table (--table), and the test asserts each process's exit status and that its table
// lists exactly the expected runs (op, algorithm, datatype, root, bytes), each checked.
// The expected runs come from the registry (firmware/registry.h), not from cclo-run.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "firmware/registry.h"
#include "hw/types.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

constexpr uint64_t kEagerBytes = 4096;
constexpr uint64_t kSegmentBytes = 16384;
// A hung op fails after this, and the whole round is bounded by kRoundTimeout.
constexpr int kOpTimeoutSeconds = 60;
constexpr absl::Duration kRoundTimeout = absl::Minutes(4);
// Lines of each daemon's log printed after a failure.
constexpr size_t kDaemonLogLines = 40;

// The ops of `cclo-run --ops all`, in its order, as the collective each one runs (sendrecv:
// recv, whose algorithms cclo-run forces on both sides).
constexpr hw::Collective kOps[] = {hw::Collective::kRecv,      hw::Collective::kBcast,
                                   hw::Collective::kScatter,   hw::Collective::kGather,
                                   hw::Collective::kAllgather, hw::Collective::kReduce,
                                   hw::Collective::kAllreduce, hw::Collective::kReduceScatter,
                                   hw::Collective::kAlltoall,  hw::Collective::kBarrier};

std::string OpName(hw::Collective collective) {
  if (collective == hw::Collective::kRecv) return "sendrecv";
  return std::string(hw::CollectiveName(collective));
}

// One world: its size and how many ranks share a daemon.
struct Layout {
  uint32_t size;
  uint32_t ranks_per_daemon;
};

// One cclo-run process per rank with the same arguments.
struct Round {
  std::vector<hw::DataType> datatypes;  // all of one element size
  bool every_algorithm;                 // else the daemon's default selection
};

const Round kRounds[] = {
    {{hw::DataType::kFloat32, hw::DataType::kInt32}, true},
    {{hw::DataType::kFloat16}, true},
    {{hw::DataType::kFloat64}, false},
};

// Bytes per rank on both sides of the eager limit and the segment size, for `element`.
std::vector<uint64_t> BoundarySizes(uint64_t element) {
  return {0,
          element,
          kEagerBytes - element,
          kEagerBytes,
          kEagerBytes + element,
          kSegmentBytes - element,
          kSegmentBytes,
          kSegmentBytes + element,
          8 * (kSegmentBytes + element)};
}

// "op algorithm datatype root bytes" of every run cclo-run must report for `round`, in its
// order: by op, algorithm, datatype, root (every one of `size`), then size; a barrier runs
// once, at 0 bytes.
std::vector<std::string> ExpectedRuns(const Round& round, uint32_t size,
                                      const std::vector<uint64_t>& sizes) {
  std::vector<std::string> runs;
  for (hw::Collective op : kOps) {
    std::vector<std::string> algorithms = {"-"};
    if (round.every_algorithm) {
      algorithms.clear();
      for (const firmware::Algorithm* algorithm : firmware::ForCollective(op)) {
        algorithms.emplace_back(algorithm->name);
      }
    }
    std::vector<std::string> op_roots = {"-"};
    if (hw::HasRoot(op)) {
      op_roots.clear();
      for (uint32_t root = 0; root < size; ++root) op_roots.push_back(absl::StrCat(root));
    }
    const std::vector<uint64_t> op_sizes =
        op == hw::Collective::kBarrier ? std::vector<uint64_t>{0} : sizes;
    for (const std::string& algorithm : algorithms) {
      for (hw::DataType datatype : round.datatypes) {
        for (const std::string& root : op_roots) {
          for (uint64_t bytes : op_sizes) {
            runs.push_back(
                absl::StrJoin({OpName(op), algorithm, std::string(hw::DataTypeName(datatype)), root,
                               absl::StrCat(bytes)},
                              " "));
          }
        }
      }
    }
  }
  return runs;
}

// The rows of the table in a cclo-run output: the runs ("op algorithm datatype root bytes")
// and, in `unchecked`, those whose ok cell is not "yes".
std::vector<std::string> TableRuns(const std::string& output, std::vector<std::string>& unchecked) {
  std::vector<std::string> runs;
  bool in_table = false;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!in_table) {
      in_table = !cells.empty() && cells[0] == "op" && cells.size() == 8;
      continue;
    }
    if (cells.size() != 8) break;
    std::string run = absl::StrJoin(cells.begin(), cells.begin() + 5, " ");
    if (cells[7] != "yes") unchecked.push_back(run);
    runs.push_back(std::move(run));
  }
  return runs;
}

// The last `count` non-empty lines of `output`.
std::string LastLines(const std::string& output, size_t count) {
  std::vector<std::string> lines = absl::StrSplit(output, '\n', absl::SkipEmpty());
  return absl::StrJoin(lines.end() - std::min(count, lines.size()), lines.end(), "\n");
}

// Where `got` first departs from `expected`, or "" if they are equal.
std::string FirstDifference(const std::vector<std::string>& expected,
                            const std::vector<std::string>& got) {
  for (size_t i = 0; i < std::max(expected.size(), got.size()); ++i) {
    const std::string want = i < expected.size() ? expected[i] : "(none)";
    const std::string have = i < got.size() ? got[i] : "(none)";
    if (want != have) {
      return absl::StrCat("row ", i, " of ", expected.size(), ": expected '", want, "', got '",
                          have, "' (", got.size(), " rows)");
    }
  }
  return "";
}

class MatrixTest : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    const Layout layout = GetParam();
    const std::string config =
        absl::StrCat("segment_bytes: ", kSegmentBytes, "\neager_max_bytes: ", kEagerBytes, "\n");
    const uint32_t daemons = (layout.size + layout.ranks_per_daemon - 1) / layout.ranks_per_daemon;
    for (uint32_t i = 0; i < daemons; ++i) daemons_.push_back(std::make_unique<Daemon>(config));
    for (uint32_t rank = 0; rank < layout.size; ++rank) {
      placement_.push_back(daemons_[rank / layout.ranks_per_daemon].get());
    }
  }

  // Stops the daemons side by side rather than one after the other. After a failure, first
  // prints the end of each daemon's log: a broken communicator's line says what every call
  // on it was waiting for.
  void TearDown() override {
    for (size_t i = 0; i < daemons_.size() && HasFailure(); ++i) {
      std::fprintf(stderr, "--- the last lines of cclod %zu's log:\n%s\n", i,
                   LastLines(daemons_[i]->process().Output(), kDaemonLogLines).c_str());
    }
    for (const std::unique_ptr<Daemon>& daemon : daemons_) daemon->process().Signal(SIGTERM);
  }

  // Runs `round` as one cclo-run per rank and checks every process's status and table.
  void RunRound(const Round& round) {
    const uint64_t element = hw::DataTypeSize(round.datatypes[0]);
    const std::vector<uint64_t> sizes = BoundarySizes(element);
    std::vector<std::string> datatypes;
    for (hw::DataType datatype : round.datatypes) {
      datatypes.emplace_back(hw::DataTypeName(datatype));
    }
    std::vector<std::string> options = {"--ops",        "all",
                                        "--datatype",   absl::StrJoin(datatypes, ","),
                                        "--sizes",      absl::StrJoin(sizes, ","),
                                        "--root",       "all",
                                        "--op-timeout", absl::StrCat(kOpTimeoutSeconds),
                                        "--table"};
    if (round.every_algorithm) options.insert(options.end(), {"--algorithm", "all"});
    const std::string token = NewToken(*placement_[0]);
    std::vector<std::vector<std::string>> commands;
    for (size_t rank = 0; rank < placement_.size(); ++rank) {
      std::vector<std::string> command = {Runfile("client/cclo-run"),
                                          "run",
                                          "--runtime-dir",
                                          placement_[rank]->runtime_dir(),
                                          "--token",
                                          token,
                                          "--rank",
                                          absl::StrCat(rank),
                                          "--size",
                                          absl::StrCat(placement_.size())};
      command.insert(command.end(), options.begin(), options.end());
      commands.push_back(std::move(command));
    }
    const std::vector<std::string> expected = ExpectedRuns(round, placement_.size(), sizes);
    std::vector<ProcessResult> results = RunAll(commands, kRoundTimeout);
    for (size_t rank = 0; rank < results.size(); ++rank) {
      SCOPED_TRACE(absl::StrCat("rank ", rank, " of ", results.size(), ", datatypes ",
                                absl::StrJoin(datatypes, ",")));
      const ProcessResult& result = results[rank];
      EXPECT_FALSE(result.timed_out);
      std::vector<std::string> unchecked;
      const std::vector<std::string> runs = TableRuns(result.output, unchecked);
      // An op error ends cclo-run before its table; its last line names the op.
      EXPECT_EQ(result.exit_code, 0) << LastLines(result.output, 1);
      if (result.exit_code != 0 && runs.empty()) continue;
      EXPECT_EQ(FirstDifference(expected, runs), "");
      EXPECT_TRUE(unchecked.empty()) << unchecked.size() << " runs with wrong results:\n"
                                     << absl::StrJoin(unchecked, "\n");
    }
  }

  std::vector<std::unique_ptr<Daemon>> daemons_;
  std::vector<Daemon*> placement_;  // rank -> its daemon
};

TEST_P(MatrixTest, EveryCollectiveAlgorithmDatatypeAndBoundarySize) {
  for (const Round& round : kRounds) RunRound(round);
}

std::vector<Layout> Layouts() {
  std::vector<Layout> layouts;
  for (uint32_t size = 2; size <= 8; ++size) {
    layouts.push_back({size, 1});
    layouts.push_back({size, 2});
  }
  return layouts;
}

INSTANTIATE_TEST_SUITE_P(Worlds, MatrixTest, ::testing::ValuesIn(Layouts()),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return absl::StrCat(
                               info.param.size, "Ranks",
                               info.param.ranks_per_daemon == 1 ? "OnePerDaemon" : "TwoPerDaemon");
                         });

}  // namespace
}  // namespace cclo::testing
