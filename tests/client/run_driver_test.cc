// cclo-run against a real cclod: every rank of a communicator runs cclo-run's Main in its
// own thread of this process, all attached to one daemon.
#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/run/check.h"
#include "client/run/commands.h"
#include "client/run/driver.h"
#include "client/run/options.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo::run {
namespace {

// A rank's client leaves when its run ends. Ending with allreduce (or barrier) keeps every
// rank until all have their data.
constexpr char kOpsEndingInAllreduce[] = "sendrecv,bcast,allreduce";

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

// Runs cclo-run with `args`.
Outcome CcloRun(std::vector<std::string> args) {
  args.insert(args.begin(), "cclo-run");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out, err;
  const int code = Main(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

class RunDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new testing::Daemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  static std::string MakeToken() {
    Outcome token = CcloRun({"token", "--runtime-dir", daemon_->runtime_dir()});
    EXPECT_EQ(token.code, 0) << token.err;
    EXPECT_EQ(token.out.back(), '\n');
    return token.out.substr(0, token.out.size() - 1);
  }

  // Runs `cclo-run run` as every rank of one communicator at once; rank r adds `extra[r]`.
  static std::vector<Outcome> RunRanks(const std::vector<std::vector<std::string>>& extra) {
    const std::string token = MakeToken();
    const size_t size = extra.size();
    std::vector<Outcome> outcomes(size);
    std::vector<std::thread> ranks;
    for (size_t rank = 0; rank < size; ++rank) {
      ranks.emplace_back([&, rank] {
        std::vector<std::string> args = {"run",
                                         "--runtime-dir",
                                         daemon_->runtime_dir(),
                                         "--token",
                                         token,
                                         "--rank",
                                         absl::StrCat(rank),
                                         "--size",
                                         absl::StrCat(size)};
        args.insert(args.end(), extra[rank].begin(), extra[rank].end());
        outcomes[rank] = CcloRun(args);
      });
    }
    for (std::thread& rank : ranks) rank.join();
    return outcomes;
  }

  // RunRanks with the same `extra` for each of `size` ranks.
  static std::vector<Outcome> RunAllRanks(uint32_t size, const std::vector<std::string>& extra) {
    return RunRanks(std::vector<std::vector<std::string>>(size, extra));
  }

  static testing::Daemon* daemon_;
};

testing::Daemon* RunDriverTest::daemon_ = nullptr;

TEST_F(RunDriverTest, TokenIsPrintedOnItsOwnLine) {
  const std::string token = MakeToken();
  std::smatch match;
  ASSERT_TRUE(std::regex_match(
      token, match, std::regex("cclo1-[0-9a-f]{32}-[0-9a-f]{64}-(127\\.0\\.0\\.1:[0-9]+)")))
      << token;
  // The root address in the token is the daemon's own peer address.
  EXPECT_TRUE(daemon_->process().WaitForOutput(absl::StrCat("ready: peer ", match[1].str(), ","),
                                               absl::ZeroDuration()))
      << daemon_->process().Output();
}

TEST_F(RunDriverTest, TheTokenMayComeFromTheEnvironment) {
  // Every user may read a process's argv (/proc/PID/cmdline), only its own its environment.
  ASSERT_EQ(setenv("CCLO_TOKEN", MakeToken().c_str(), 1), 0);
  Outcome outcome = CcloRun({"run", "--runtime-dir", daemon_->runtime_dir(), "--rank", "0",
                             "--size", "1", "--ops", "allreduce", "--sizes", "1K"});
  unsetenv("CCLO_TOKEN");
  EXPECT_EQ(outcome.code, 0) << outcome.err;
}

TEST_F(RunDriverTest, EveryOpPassesAtEveryWorldSizeAndRootInPlaceOrNot) {
  // "all" ends with barrier, which keeps every rank until all are done.
  for (uint32_t size : {1u, 2u, 3u, 4u}) {
    for (bool in_place : {false, true}) {
      const std::string ops = size == 1 ? "bcast,scatter,gather,allgather,reduce,allreduce,"
                                          "reduce_scatter,alltoall,barrier"
                                        : "all";
      std::vector<std::string> args = {"--ops", ops, "--sizes", "0,8,1K,64K", "--root", "all"};
      if (in_place) args.push_back("--in-place");
      std::vector<Outcome> outcomes = RunAllRanks(size, args);
      for (uint32_t rank = 0; rank < size; ++rank) {
        EXPECT_EQ(outcomes[rank].code, 0)
            << "size " << size << " rank " << rank << (in_place ? " in place: " : ": ")
            << outcomes[rank].err;
        EXPECT_EQ(outcomes[rank].out, "");
      }
    }
  }
}

TEST_F(RunDriverTest, EveryOpPassesInEveryDatatype) {
  for (const char* datatype :
       {"int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"}) {
    for (const char* reduce_op : {"sum", "min"}) {
      std::vector<Outcome> outcomes =
          RunAllRanks(3, {"--ops", "all", "--sizes", "0,8,1K", "--datatype", datatype,
                          "--reduce-op", reduce_op, "--iters", "2", "--root", "2"});
      for (uint32_t rank = 0; rank < 3; ++rank) {
        EXPECT_EQ(outcomes[rank].code, 0)
            << datatype << " " << reduce_op << " rank " << rank << ": " << outcomes[rank].err;
      }
    }
  }
}

// The whitespace-separated cells of a table line.
std::vector<std::string> Cells(const std::string& line) {
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

// "op algorithm datatype root bytes" of each row of a table printed by --table.
std::vector<std::string> Runs(const std::string& table) {
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  std::vector<std::string> runs;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> cells = Cells(lines[i]);
    runs.push_back(absl::StrJoin(cells.begin(), cells.begin() + 5, " "));
  }
  return runs;
}

TEST_F(RunDriverTest, RanksThatAskPrintTheTable) {
  // Only rank 0 asks for the table, as the demo does.
  const std::vector<std::string> common = {"--ops", kOpsEndingInAllreduce, "--sizes",
                                           "1K,4K", "--reduce-op",         "max"};
  std::vector<std::string> rank0 = common;
  rank0.push_back("--table");
  std::vector<Outcome> outcomes = RunRanks({rank0, common});
  ASSERT_EQ(outcomes[0].code, 0) << outcomes[0].err;
  ASSERT_EQ(outcomes[1].code, 0) << outcomes[1].err;
  EXPECT_EQ(outcomes[1].out, "");
  std::istringstream table(outcomes[0].out);
  std::string line;
  std::getline(table, line);
  EXPECT_EQ(Cells(line), (std::vector<std::string>{"op", "algorithm", "datatype", "root", "bytes",
                                                   "time_us", "GB/s", "ok"}));
  std::vector<std::vector<std::string>> rows;
  while (std::getline(table, line)) rows.push_back(Cells(line));
  ASSERT_EQ(rows.size(), 6u) << outcomes[0].out;
  for (const std::vector<std::string>& row : rows) EXPECT_EQ(row.back(), "yes");
  EXPECT_EQ(Runs(outcomes[0].out),
            (std::vector<std::string>{"sendrecv - float32 - 1024", "sendrecv - float32 - 4096",
                                      "bcast - float32 0 1024", "bcast - float32 0 4096",
                                      "allreduce - float32 - 1024", "allreduce - float32 - 4096"}));
}

TEST_F(RunDriverTest, RootedOpsRunOncePerRoot) {
  const std::vector<std::string> common = {"--ops", "gather,barrier", "--sizes",
                                           "8,16",  "--root",         "all"};
  std::vector<std::string> rank0 = common;
  rank0.push_back("--table");
  std::vector<Outcome> outcomes = RunRanks({rank0, common, common});
  for (const Outcome& outcome : outcomes) ASSERT_EQ(outcome.code, 0) << outcome.err;
  EXPECT_EQ(Runs(outcomes[0].out),
            (std::vector<std::string>{"gather - float32 0 8", "gather - float32 0 16",
                                      "gather - float32 1 8", "gather - float32 1 16",
                                      "gather - float32 2 8", "gather - float32 2 16",
                                      "barrier - float32 - 0"}));
}

TEST_F(RunDriverTest, EveryAlgorithmInEveryDatatypeOfAList) {
  // Every rank asks for the table: each prints its own runs and checks.
  const std::vector<std::string> args = {
      "--ops",   "all",    "--algorithm", "all", "--datatype", "float32,int32,float16",
      "--sizes", "0,6,1K", "--root",      "all", "--table"};
  std::vector<Outcome> outcomes = RunAllRanks(3, args);
  std::vector<std::string> expected;
  RunArguments arguments;
  arguments.runtime_dir = "unused";
  arguments.token = "unused";
  arguments.rank = 0;
  arguments.size = 3;
  arguments.ops = "all";
  arguments.algorithm = "all";
  arguments.datatype = "float32,int32,float16";
  arguments.sizes = "0,6,1K";
  arguments.root = "all";
  const RunOptions options = *ValidateRunArguments(arguments);
  for (Op op : options.ops) {
    for (const std::string& algorithm : AlgorithmsOf(options, op)) {
      for (hw::DataType datatype : options.datatypes) {
        for (std::optional<uint32_t> root : RootsOf(options, op)) {
          for (uint64_t bytes : SizesOf(options, op, datatype)) {
            expected.push_back(absl::StrCat(OpName(op), " ", algorithm, " ",
                                            std::string(hw::DataTypeName(datatype)), " ",
                                            root ? absl::StrCat(*root) : "-", " ", bytes));
          }
        }
      }
    }
  }
  // Spot checks of the expectation itself: every allreduce algorithm, sizes per datatype.
  EXPECT_NE(std::find(expected.begin(), expected.end(), "allreduce reduce_bcast int32 - 1024"),
            expected.end());
  EXPECT_NE(std::find(expected.begin(), expected.end(), "bcast chain float16 2 6"), expected.end());
  EXPECT_NE(std::find(expected.begin(), expected.end(), "sendrecv direct float32 - 4"),
            expected.end());
  for (uint32_t rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(outcomes[rank].code, 0) << "rank " << rank << ": " << outcomes[rank].err;
    EXPECT_EQ(Runs(outcomes[rank].out), expected) << "rank " << rank;
    EXPECT_EQ(outcomes[rank].out.find(" no\n"), std::string::npos) << outcomes[rank].out;
  }
}

TEST_F(RunDriverTest, WrongResultIsReportedWithTheFirstMismatch) {
  // Ranks that disagree on the datatype of a sendrecv get wrong results: a point-to-point
  // message names no datatype (MPI checks none either), so each rank reads the other's
  // int32 or float32 values as its own type.
  const std::vector<std::string> common = {"--ops", "sendrecv", "--sizes", "64"};
  std::vector<std::string> rank0 = common;
  rank0.insert(rank0.end(), {"--datatype", "int32", "--table"});
  std::vector<std::string> rank1 = common;
  rank1.insert(rank1.end(), {"--datatype", "float32"});
  std::vector<Outcome> outcomes = RunRanks({rank0, rank1});
  const hw::DataType datatypes[2] = {hw::DataType::kInt32, hw::DataType::kFloat32};
  constexpr uint64_t kSendrecvSalt = 1;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(outcomes[rank].code, 1);
    std::smatch match;
    ASSERT_TRUE(
        std::regex_match(outcomes[rank].err, match,
                         std::regex(absl::StrCat("cclo-run: rank ", rank,
                                                 ": sendrecv 64 bytes: mismatch at index ([0-9]+): "
                                                 "expected (-?[0-9]+) got (.+)\n"))))
        << outcomes[rank].err;
    const uint64_t index = std::stoull(match[1].str());
    const OpShape shape{Op::kSendRecv, datatypes[rank], rank, 2, 0, hw::ReduceOp::kSum, 16};
    EXPECT_EQ(match[2].str(), absl::StrCat(ExpectedValue(shape, index, kSendrecvSalt)));
    EXPECT_NE(match[3].str(), match[2].str());
  }
  std::vector<std::string> rows = absl::StrSplit(outcomes[0].out, '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 2u) << outcomes[0].out;
  EXPECT_EQ(Runs(outcomes[0].out), (std::vector<std::string>{"sendrecv - int32 - 64"}));
  EXPECT_EQ(Cells(rows[1]).back(), "no") << rows[1];
  EXPECT_EQ(outcomes[1].out, "");
}

TEST_F(RunDriverTest, ForcedAlgorithmRunsOrEndsTheRunWithItsError) {
  std::vector<Outcome> outcomes =
      RunAllRanks(2, {"--ops", "allreduce", "--sizes", "1K", "--algorithm", "ring"});
  for (const Outcome& outcome : outcomes) EXPECT_EQ(outcome.code, 0) << outcome.err;
  outcomes = RunAllRanks(
      1, {"--ops", "bcast", "--sizes", "4", "--algorithm", "ring", "--datatype", "int32,float32"});
  EXPECT_EQ(outcomes[0].code, 1);
  EXPECT_EQ(outcomes[0].err.rfind("cclo-run: rank 0: bcast ring 4 bytes of int32 at root 0: "
                                  "unknown bcast algorithm 'ring'; valid: one_to_all",
                                  0),
            0u)
      << outcomes[0].err;
}

TEST(RunCommandLineTest, CommandLineErrorsExitTwo) {
  Outcome outcome = CcloRun({"run", "--token", "t", "--rank", "0", "--size", "2", "--sizes", "1Z"});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_EQ(outcome.err,
            "cclo-run: --sizes: '1Z' is not a byte size (digits with an optional K, M or G)\n");
  outcome = CcloRun({"run", "--token", "t", "--rank", "0"});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_NE(outcome.err.find("--size is required"), std::string::npos) << outcome.err;
  outcome = CcloRun({"run", "--token", "t", "--rank", "0", "--size", "2", "--frobnicate"});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_NE(outcome.err.find("--frobnicate"), std::string::npos) << outcome.err;
  // Not octal 8, and not an unsigned's largest value.
  outcome = CcloRun({"run", "--token", "t", "--rank", "010", "--size", "12"});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_NE(outcome.err.find("--rank: 010 is not a decimal whole number"), std::string::npos)
      << outcome.err;
  outcome = CcloRun({"run", "--token", "t", "--rank", "0", "--size", "-1"});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_NE(outcome.err.find("--size: -1 is not a decimal whole number"), std::string::npos)
      << outcome.err;
  // Past what the option holds: CLI11 gave its largest value, which was then refused as if
  // given ("--size: 9223372036854775807 is not a world size").
  for (const char* huge : {"9223372036854775808", "18446744073709551616"}) {
    outcome = CcloRun({"run", "--token", "t", "--rank", "0", "--size", huge});
    EXPECT_EQ(outcome.code, 2);
    EXPECT_NE(outcome.err.find(
                  absl::StrCat("--size: ", huge, " is too large (at most 9223372036854775807)")),
              std::string::npos)
        << outcome.err;
  }
  // protobuf would not send the join, which failed with no reason.
  outcome = CcloRun({"run", "--token", "t\xff", "--rank", "0", "--size", "1"});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_NE(outcome.err.find("--token: is not UTF-8 text (byte 0xff at offset 1)"),
            std::string::npos)
      << outcome.err;
  // Dialled /attach.sock.
  outcome = CcloRun({"token", "--runtime-dir", ""});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_NE(
      outcome.err.find("--runtime-dir: is empty; give the dir of cclod's sockets (as /run/cclod)"),
      std::string::npos)
      << outcome.err;
  outcome = CcloRun({"--attach-timeout", "nan", "token"});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_NE(outcome.err.find("--attach-timeout: nan is not a number of seconds in [0.001, 86400]"),
            std::string::npos)
      << outcome.err;
  // strtod read these as 16 s and 1000 s; 1e300 s was an infinite wait.
  for (const auto& [flag, seconds, range] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--join-timeout", "0x10", "[0.001, 86400]"},
           {"--join-timeout", "1e300", "[0.001, 86400]"},
           {"--join-timeout", "0", "[0.001, 86400]"},
           {"--op-timeout", "1e3", "[0, 86400]"},
           {"--op-timeout", "inf", "[0, 86400]"}}) {
    outcome = CcloRun({"run", "--token", "t", "--rank", "0", "--size", "1", flag, seconds});
    EXPECT_EQ(outcome.code, 2) << flag << " " << seconds;
    EXPECT_NE(outcome.err.find(
                  absl::StrCat(flag, ": ", seconds, " is not a number of seconds in ", range)),
              std::string::npos)
        << outcome.err;
  }
  outcome = CcloRun({"walk"});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_NE(outcome.err.find("walk"), std::string::npos) << outcome.err;
  outcome = CcloRun({});
  EXPECT_EQ(outcome.code, 2);
  EXPECT_EQ(outcome.err,
            "cclo-run: a command is required: one of token, run\n"
            "Run with --help for more information.\n");
  outcome = CcloRun({"token", "--help"});
  EXPECT_EQ(outcome.code, 0);
  EXPECT_NE(outcome.out.find("Usage: cclo-run token"), std::string::npos) << outcome.out;
}

TEST(RunCommandLineTest, UnreachableDaemonExitsOne) {
  Outcome outcome = CcloRun({"token", "--runtime-dir", "/tmp/no-such-cclod-dir"});
  EXPECT_EQ(outcome.code, 1);
  EXPECT_EQ(outcome.err,
            "cclo-run: cannot connect to /tmp/no-such-cclod-dir/attach.sock: No such file or "
            "directory\n");
}

}  // namespace
}  // namespace cclo::run
