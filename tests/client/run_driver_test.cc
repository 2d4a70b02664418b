// cclo-run against the fake daemon: every rank of a communicator in its own thread.
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/run/commands.h"
#include "client/run/driver.h"
#include "gtest/gtest.h"
#include "tests/client/fake_daemon.h"

namespace cclo::run {
namespace {

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

std::string MakeToken(const testing::FakeDaemon& daemon) {
  Outcome token = CcloRun({"token", "--runtime-dir", daemon.runtime_dir()});
  EXPECT_EQ(token.code, 0) << token.err;
  EXPECT_EQ(token.out.back(), '\n');
  return token.out.substr(0, token.out.size() - 1);
}

// Runs `cclo-run run` as every rank of a `size`-rank communicator at once, with `extra` args.
std::vector<Outcome> RunAllRanks(const testing::FakeDaemon& daemon, uint32_t size,
                                 const std::vector<std::string>& extra) {
  const std::string token = MakeToken(daemon);
  std::vector<Outcome> outcomes(size);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      std::vector<std::string> args = {"run",
                                       "--runtime-dir",
                                       daemon.runtime_dir(),
                                       "--token",
                                       token,
                                       "--rank",
                                       std::to_string(rank),
                                       "--size",
                                       std::to_string(size)};
      args.insert(args.end(), extra.begin(), extra.end());
      outcomes[rank] = CcloRun(args);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  return outcomes;
}

TEST(RunDriverTest, TokenIsPrintedOnItsOwnLine) {
  testing::FakeDaemon daemon;
  EXPECT_EQ(MakeToken(daemon).rfind("comm-", 0), 0u);
}

TEST(RunDriverTest, EveryOpPassesAtEveryWorldSize) {
  testing::FakeDaemon daemon;
  for (uint32_t size : {1u, 2u, 3u, 4u}) {
    for (const char* datatype : {"float32", "int32", "float64"}) {
      const std::string ops = size == 1 ? "bcast,allreduce" : "sendrecv,bcast,allreduce";
      std::vector<Outcome> outcomes =
          RunAllRanks(daemon, size,
                      {"--ops", ops, "--sizes", "0,8,1K,64K", "--datatype", datatype, "--iters",
                       "2", "--root", std::to_string(size - 1)});
      for (uint32_t rank = 0; rank < size; ++rank) {
        EXPECT_EQ(outcomes[rank].code, 0)
            << "size " << size << " rank " << rank << " " << datatype << ": " << outcomes[rank].err;
        EXPECT_EQ(outcomes[rank].out, "");
      }
    }
  }
}

TEST(RunDriverTest, RankZeroPrintsTheTable) {
  testing::FakeDaemon daemon;
  // Only rank 0 asks for the table, as the demo does.
  const std::string token = MakeToken(daemon);
  const std::vector<std::string> common = {"run",     "--runtime-dir", daemon.runtime_dir(),
                                           "--token", token,           "--size",
                                           "2",       "--ops",         "allreduce,bcast",
                                           "--sizes", "1K,4K",         "--reduce-op",
                                           "max",     "--algorithm",   "ring"};
  std::vector<Outcome> outcomes(2);
  std::thread rank1([&] {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--rank", "1"});
    outcomes[1] = CcloRun(args);
  });
  std::vector<std::string> args = common;
  args.insert(args.end(), {"--rank", "0", "--table"});
  outcomes[0] = CcloRun(args);
  rank1.join();
  ASSERT_EQ(outcomes[0].code, 0) << outcomes[0].err;
  ASSERT_EQ(outcomes[1].code, 0) << outcomes[1].err;
  EXPECT_EQ(outcomes[1].out, "");
  std::istringstream table(outcomes[0].out);
  std::string line;
  std::getline(table, line);
  std::vector<std::string> header = absl::StrSplit(line, ' ', absl::SkipEmpty());
  EXPECT_EQ(header, (std::vector<std::string>{"op", "bytes", "time_us", "GB/s", "ok"}));
  std::vector<std::string> rows;
  while (std::getline(table, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 4u) << outcomes[0].out;
  EXPECT_EQ(rows[0].rfind("allreduce  1024 ", 0), 0u) << rows[0];
  EXPECT_EQ(rows[3].rfind("bcast      4096 ", 0), 0u) << rows[3];
  for (const std::string& row : rows) EXPECT_EQ(row.substr(row.size() - 3), "yes") << row;
}

TEST(RunDriverTest, WrongResultIsReportedWithTheFirstMismatch) {
  testing::FakeDaemon::Options options;
  options.corrupt_allreduce = true;
  testing::FakeDaemon daemon(options);
  std::vector<Outcome> outcomes =
      RunAllRanks(daemon, 2, {"--ops", "sendrecv,allreduce,bcast", "--sizes", "64", "--table"});
  for (uint32_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(outcomes[rank].code, 1);
    EXPECT_NE(outcomes[rank].err.find("cclo-run: rank " + std::to_string(rank) +
                                      ": allreduce 64 bytes: mismatch at index 3: expected "),
              std::string::npos)
        << outcomes[rank].err;
  }
  EXPECT_NE(outcomes[0].out.find("allreduce  64     "), std::string::npos) << outcomes[0].out;
  EXPECT_NE(outcomes[0].out.find("no\n"), std::string::npos) << outcomes[0].out;
  EXPECT_NE(outcomes[0].out.find("sendrecv"), std::string::npos) << outcomes[0].out;
}

TEST(RunDriverTest, FailedOpEndsTheRunWithItsError) {
  testing::FakeDaemon daemon;
  std::vector<Outcome> outcomes =
      RunAllRanks(daemon, 1, {"--ops", "bcast", "--sizes", "4", "--algorithm", "fail"});
  EXPECT_EQ(outcomes[0].code, 1);
  EXPECT_EQ(outcomes[0].err, "cclo-run: rank 0: bcast 4 bytes: op failed as asked\n");
}

TEST(RunDriverTest, CommandLineErrorsExitTwo) {
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
  EXPECT_EQ(CcloRun({"walk"}).code, 2);
  outcome = CcloRun({"token", "--help"});
  EXPECT_EQ(outcome.code, 0);
  EXPECT_NE(outcome.out.find("Usage: cclo-run token"), std::string::npos) << outcome.out;
}

TEST(RunDriverTest, UnreachableDaemonExitsOne) {
  Outcome outcome = CcloRun({"token", "--runtime-dir", "/tmp/no-such-cclod-dir"});
  EXPECT_EQ(outcome.code, 1);
  EXPECT_EQ(outcome.err,
            "cclo-run: cannot connect to /tmp/no-such-cclod-dir/attach.sock: No such file or "
            "directory\n");
}

}  // namespace
}  // namespace cclo::run
