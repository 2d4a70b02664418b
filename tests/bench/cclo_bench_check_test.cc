// cclo-bench --check at small sizes on two daemons it starts: every op's result is right at
// every size (no timing is judged), and bad arguments are refused with the reason.
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

ProcessResult Bench(const std::vector<std::string>& args) {
  std::vector<std::string> command = {Runfile("bench/cclo-bench")};
  command.insert(command.end(), args.begin(), args.end());
  return Process(command).Wait(absl::Minutes(4));
}

TEST(CcloBenchTest, CheckedSweepOnTwoDaemonsIsRightEverywhere) {
  ProcessResult result = Bench({"--check", "--max-bytes", "64K", "--step-factor", "4", "--warmup",
                                "1", "--iters", "2", "--daemons", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::set<std::string> ops = {"sendrecv",  "send",      "bcast",          "reduce",
                                     "allreduce", "allgather", "reduce_scatter", "alltoall",
                                     "nop",       "nop_grpc"};
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
    std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (cells.empty() || !ops.contains(std::string(cells[0]))) continue;
    ++rows;
    ASSERT_EQ(cells.size(), 8u) << line;
    EXPECT_EQ(cells[7], absl::StartsWith(cells[0], "nop") ? "-" : "ok") << line;  // no output
  }
  // 8 ops at 8 B, 32 B, ..., 32 KiB (allgather, reduce_scatter and alltoall too: one float
  // per rank at 8 B), and nop and nop_grpc once each.
  EXPECT_EQ(rows, 8 * 7 + 2) << result.output;
  // The figures depend on the kernel's congestion control: the header names it.
  std::ifstream file("/proc/sys/net/ipv4/tcp_congestion_control");
  std::string congestion_control;
  ASSERT_TRUE(std::getline(file, congestion_control));
  EXPECT_TRUE(absl::StrContains(result.output,
                                absl::StrCat("tcp congestion control: ", congestion_control, " (")))
      << result.output;
}

TEST(CcloBenchTest, ManyRanksOnOneDaemonAreRightToo) {
  ProcessResult result =
      Bench({"--check", "--ops", "allreduce,alltoall,sendrecv,send", "--max-bytes", "4K",
             "--step-factor", "4", "--iters", "2", "--daemons", "1", "--ranks-per-daemon", "3"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

// With --check, Open MPI's and Gloo's ranks check their results too (a wrong one fails that
// stack's sweep, which would leave its columns empty), over 3 ranks, whose chunked sizes do not
// divide into the sweep's.
TEST(CcloBenchTest, BaselinesAreCheckedToo) {
  ProcessResult result =
      Bench({"--check", "--daemons", "3", "--ops",
             "sendrecv,send,bcast,reduce,allreduce,allgather,reduce_scatter,alltoall",
             "--max-bytes", "4K", "--step-factor", "4", "--warmup", "1", "--iters", "2",
             "--baseline", "mpi", "--baseline", "gloo"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(absl::StrContains(result.output, "failed")) << result.output;
  const std::set<std::string> ops = {"sendrecv",  "send",      "bcast",          "reduce",
                                     "allreduce", "allgather", "reduce_scatter", "alltoall"};
  const std::set<std::string> gloo_ops = {"bcast", "allreduce", "allgather"};
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
    std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (cells.empty() || !ops.contains(std::string(cells[0]))) continue;
    ++rows;
    // op size p50 p99 algbw busbw cpu check mpi_p50 xmpi gloo_p50 xgloo
    ASSERT_EQ(cells.size(), 12u) << line;
    EXPECT_EQ(cells[7], "ok") << line;
    EXPECT_NE(cells[8], "-") << line;
    EXPECT_EQ(cells[10] != "-", gloo_ops.contains(std::string(cells[0]))) << line;
  }
  // 5 ops at 8 B to 2 KiB, and the 3 chunked ones from 32 B (8 B is under a float per rank).
  EXPECT_EQ(rows, 5 * 5 + 3 * 4) << result.output;
}

TEST(CcloBenchTest, ForcedAlgorithmIsUsedAndRight) {
  ProcessResult result =
      Bench({"--check", "--ops", "allreduce,sendrecv", "--algorithm", "reduce_bcast", "--max-bytes",
             "1M", "--step-factor", "4", "--iters", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "; algorithm: reduce_bcast\n")) << result.output;
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
    std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (cells.empty() || (cells[0] != "allreduce" && cells[0] != "sendrecv")) continue;
    ++rows;
    EXPECT_EQ(cells.back(), "ok") << line;
  }
  EXPECT_EQ(rows, 2 * 9) << result.output;  // 8 B to 512 KiB in steps of 4, each op
  // The daemons refuse a name no algorithm of the op has, and say which there are; each
  // rank's refusal is reported under its rank.
  result = Bench({"--ops", "allreduce", "--algorithm", "chain", "--max-bytes", "8"});
  EXPECT_EQ(result.exit_code, 1);
  std::string refusals;
  for (int rank : {0, 1}) {
    absl::StrAppend(&refusals, rank == 0 ? "cclo-bench: " : "\n", "rank ", rank,
                    " failed (exit code 1):\ncclo-bench: rank ", rank,
                    ": allreduce 8: unknown allreduce algorithm 'chain'; valid: ring, "
                    "recursive_doubling, reduce_bcast");
  }
  EXPECT_TRUE(absl::StrContains(result.output, refusals + "\n")) << result.output;
}

// --datatype reaches every rank, whose sizes follow the element: from 2 B to 32 KiB, a
// 2-byte type has an element for allreduce and send at 2 B (float32 would not), int64 none
// at 2 B, nor for reduce_scatter's 2 ranks at 8 B (float32 would); results are right.
TEST(CcloBenchTest, OtherDatatypesAreRightToo) {
  for (const auto& [datatype, rows_expected] :
       std::vector<std::pair<std::string, int>>{{"float16", 23}, {"bfloat16", 23}, {"int64", 20}}) {
    ProcessResult result = Bench(
        {"--check", "--datatype", datatype, "--ops", "allreduce,reduce_scatter,send", "--min-bytes",
         "2", "--max-bytes", "32K", "--step-factor", "4", "--warmup", "1", "--iters", "2"});
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(absl::StrContains(result.output, absl::StrCat(", loopback, ", datatype, " sum;")))
        << result.output;
    int rows = 0;
    for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
      std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (cells.empty() ||
          (cells[0] != "allreduce" && cells[0] != "reduce_scatter" && cells[0] != "send")) {
        continue;
      }
      ++rows;
      EXPECT_EQ(cells.back(), "ok") << line;
    }
    EXPECT_EQ(rows, rows_expected) << result.output;
  }
}

TEST(CcloBenchTest, RoundsRunEveryStackAgainAndPoolThem) {
  ProcessResult result =
      Bench({"--check", "--ops", "allreduce,nop", "--max-bytes", "1K", "--step-factor", "4",
             "--iters", "2", "--rounds", "2", "--baseline", "link", "--link-seconds", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output,
                                "2 timed iterations per size in each of 2 rounds (the stacks' "
                                "sweeps in turn, iterations pooled)"))
      << result.output;
  // iperf3 ran in each round: the link line gives the mean of both.
  EXPECT_TRUE(absl::StrContains(result.output, " per direction (the mean of 2 runs)\n"))
      << result.output;
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
    std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (cells.empty() || (cells[0] != "allreduce" && cells[0] != "nop")) continue;
    ++rows;
    EXPECT_EQ(cells[7], cells[0] == "nop" ? "-" : "ok") << line;
  }
  EXPECT_EQ(rows, 4 + 1) << result.output;  // allreduce at 8 B to 512 B in steps of 4; nop
}

TEST(CcloBenchTest, StartedDaemonsTakeTheGivenCongestionControl) {
  ProcessResult result =
      Bench({"--check", "--ops", "sendrecv,allreduce", "--max-bytes", "64K", "--step-factor", "4",
             "--iters", "2", "--data-tcp-congestion", "reno"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(
      result.output, "tcp congestion control: cclod's data sessions reno (--data-tcp-congestion)"))
      << result.output;
}

TEST(CcloBenchTest, LinkIsMeasuredOneWayAndBothWaysAtOnce) {
  ProcessResult result = Bench({"--ops", "sendrecv", "--min-bytes", "1M", "--max-bytes", "1M",
                                "--iters", "2", "--baseline", "link", "--link-seconds", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  double one_way = 0;
  double duplex = 0;
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(result.output, '\n')) {
    std::vector<absl::string_view> cells = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (absl::StartsWith(line, "link: ")) {
      // "... one stream X GB/s; one stream each way at once (--bidir) Y GB/s per direction"
      ASSERT_EQ(cells.size(), 22u) << line;
      ASSERT_TRUE(absl::SimpleAtod(cells[9], &one_way)) << line;
      ASSERT_TRUE(absl::SimpleAtod(cells[18], &duplex)) << line;
    } else if (!cells.empty() && cells[0] == "sendrecv") {
      ++rows;
      // op size p50 p99 algbw busbw cpu busbw/link busbw/duplex
      ASSERT_EQ(cells.size(), 9u) << line;
      double busbw = 0, of_link = 0, of_duplex = 0;
      ASSERT_TRUE(absl::SimpleAtod(cells[5], &busbw) && absl::SimpleAtod(cells[7], &of_link) &&
                  absl::SimpleAtod(cells[8], &of_duplex))
          << line;
      EXPECT_GT(of_link, 0) << line;
      EXPECT_GT(of_duplex, 0) << line;
      // Each ratio is busbw over its rate (both printed rounded to 3 and 2 places).
      EXPECT_NEAR(of_link, busbw / one_way, 0.01 + 0.001 / one_way) << line;
      EXPECT_NEAR(of_duplex, busbw / duplex, 0.01 + 0.001 / duplex) << line;
    }
  }
  EXPECT_GT(one_way, 0) << result.output;
  EXPECT_GT(duplex, 0) << result.output;
  EXPECT_EQ(rows, 1) << result.output;
}

TEST(CcloBenchTest, BadArgumentsAreRefusedWithTheReason) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--ops", "allreduce,bogus"}, "unknown op 'bogus'"},
      {{"--step-factor", "3"}, "--step-factor 3 is neither 2 nor 4"},
      {{"--step-factor", "-1"}, "--step-factor: -1 is not a decimal whole number"},
      // Said "too large (at most 9223372036854775807)", which the option holds.
      {{"--step-factor", "9223372036854775808"},
       "--step-factor 9223372036854775808 is neither 2 nor 4"},
      {{"--warmup", "010"}, "--warmup: 010 is not a decimal whole number"},
      // Refused as CLI11's largest value, "--daemons 9223372036854775807 is outside 1 to 64".
      {{"--daemons", "18446744073709551616"},
       "--daemons: 18446744073709551616 is too large (at most 9223372036854775807)"},
      {{"--link-seconds", "nan"}, "--link-seconds: nan is not a number of seconds in [1, 600]"},
      {{"--link-seconds", "0x10"}, "--link-seconds: 0x10 is not a number of seconds in [1, 600]"},
      {{"--deadline", "inf"}, "--deadline: inf is not a number of seconds in [0.001, 86400]"},
      {{"--deadline", "1e300"}, "--deadline: 1e300 is not a number of seconds in [0.001, 86400]"},
      {{"--daemons", "4", "--ops", "allgather", "--max-bytes", "8"},
       "--max-bytes 8 is too small for allgather over 4 ranks: it needs at least 16 bytes (one "
       "float32 per rank)"},
      {{"--min-bytes", "1M", "--max-bytes", "1K"}, "--min-bytes 1M exceeds --max-bytes 1K"},
      {{"--baseline", "nccl"}, "--baseline 'nccl' is none of mpi, gloo, link"},
      {{"--daemons", "3", "--runtime-dirs", "/a,/b"}, "--daemons 3 but --runtime-dirs names 2"},
      {{"--runtime-dirs", ""}, "--runtime-dirs '' has an empty entry"},
      {{"--runtime-dirs", "/a,"}, "--runtime-dirs '/a,' has an empty entry"},
      // Ran as "2 ranks on 2 daemons", its CPU time counted twice.
      {{"--runtime-dirs", "/a,/b,/a"},
       "--runtime-dirs '/a,/b,/a' names /a twice; use --ranks-per-daemon for more ranks on a "
       "daemon"},
      {{"--daemons", "1", "--ops", "sendrecv"}, "sendrecv needs at least 2 ranks"},
      {{"--daemons", "1", "--ops", "allreduce,send"}, "send needs at least 2 ranks"},
      {{"--iters", "0"}, "--iters 0 is outside 1 to"},
      {{"--rounds", "0"}, "--rounds 0 is outside 1 to 100"},
      {{"--algorithm", "Ring"}, "--algorithm 'Ring' is not an algorithm name (a-z, 0-9, _)"},
      {{"--datatype", "half"}, "--datatype: 'half' is not one of int8, uint8, int32, int64"},
      {{"--datatype", "float16", "--baseline", "gloo"},
       "--baseline gloo runs float32 only, not --datatype float16"},
      {{"--check", "--datatype", "bfloat16", "--ranks-per-daemon", "5", "--ops", "allreduce"},
       "--check --datatype: bfloat16 sums over 10 ranks may exceed 256, beyond which bfloat16 "
       "misses integers; use at most 8 ranks, or no --check, or no summing op"},
      {{"--runtime-dirs", "/a,/b", "--data-tcp-congestion", "cubic"},
       "--data-tcp-congestion applies to the daemons the bench starts"},
      {{"--data-tcp-congestion", "no_such_cc"},
       "--data-tcp-congestion: TCP congestion control 'no_such_cc': this kernel does not offer "
       "it (not built in or not loaded; it offers: "},
      {{"--data-tcp-congestion", "cubic\nscheduler: fifo"},
       "--data-tcp-congestion 'cubic\nscheduler: fifo': not a congestion control name"},
  };
  for (const auto& [args, message] : cases) {
    ProcessResult result = Bench(args);
    EXPECT_EQ(result.exit_code, 2) << message;
    EXPECT_TRUE(absl::StrContains(result.output, message)) << result.output;
  }
}

// Daemons it did not start: the header says whose they are, and the results are right.
TEST(CcloBenchTest, DaemonsOfRuntimeDirs) {
  Daemon a, b;
  ProcessResult result =
      Bench({"--check", "--runtime-dirs", absl::StrCat(a.runtime_dir(), ",", b.runtime_dir()),
             "--ops", "allreduce", "--max-bytes", "1K", "--warmup", "1", "--iters", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output,
                                "2 ranks on 2 daemons (1 per daemon), daemons of --runtime-dirs, "
                                "float32 sum;"))
      << result.output;
}

TEST(CcloBenchTest, AbsentDaemonIsNamed) {
  ProcessResult result =
      Bench({"--runtime-dirs", "/tmp/cclo-bench-no-such-dir,/tmp/cclo-bench-no-such-dir-either",
             "--iters", "1"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output,
                                "no cclod answers at /tmp/cclo-bench-no-such-dir/attach.sock"))
      << result.output;
}

}  // namespace
}  // namespace cclo::testing
