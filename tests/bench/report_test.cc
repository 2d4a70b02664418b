// cclo-bench's pooling of rounds and its table: what several rounds add up to, and the CPU
// figure divided by every round's bytes.
#include "bench/report.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "bench/sweep.h"
#include "gtest/gtest.h"

namespace cclo::bench {
namespace {

const std::pair<Op, uint64_t> kKey = {Op::kAllreduce, 1 << 20};

Measurements Round(std::vector<double> ours, std::vector<double> mpi, double cpu_seconds,
                   const std::string& check) {
  Measurements round;
  round.cclo.timings[kKey] = std::move(ours);
  round.cclo.cpu_seconds[kKey] = cpu_seconds;
  round.cclo.checks[kKey] = check;
  round.stacks[Baseline::kMpi][kKey] = std::move(mpi);
  return round;
}

// The smallest value with at least the fraction of all values at or below it.
TEST(PercentileTest, IsTheNearestRank) {
  EXPECT_EQ(Percentile({4, 1, 3, 2}, 0.5), 2);
  EXPECT_EQ(Percentile({7}, 0.5), 7);
  EXPECT_EQ(Percentile({}, 0.5), 0);
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_EQ(Percentile(hundred, 0.99), 99);
  EXPECT_EQ(Percentile(hundred, 0.5), 50);
  EXPECT_EQ(Percentile(hundred, 1.0), 100);
  EXPECT_EQ(Percentile(hundred, 0.0), 1);
}

TEST(PoolTest, RoundsAddUp) {
  Measurements pooled;
  Pool(pooled, Round({10, 10}, {40, 40}, 0.25, "ok"));
  Pool(pooled, Round({30, 30, 30}, {50}, 0.5, "rank 1 index 3 expected 2 got 0"));
  Pool(pooled, Round({20}, {60}, 0.25, "ok"));
  EXPECT_EQ(pooled.cclo.timings[kKey], (std::vector<double>{10, 10, 30, 30, 30, 20}));
  EXPECT_EQ(pooled.stacks[Baseline::kMpi][kKey], (std::vector<double>{40, 40, 50, 60}));
  Measurements without_mpi = Round({40}, {}, 0, "ok");
  without_mpi.stacks.clear();  // its sweep failed in this round
  Pool(pooled, without_mpi);
  EXPECT_EQ(pooled.stack_rounds[Baseline::kMpi], 3u);
  EXPECT_EQ(pooled.cclo.timings[kKey].size(), 7u);
  EXPECT_DOUBLE_EQ(pooled.cclo.cpu_seconds[kKey], 1.0);
  EXPECT_EQ(pooled.cclo.checks[kKey], "rank 1 index 3 expected 2 got 0");  // not "ok" again
}

TEST(PoolTest, LinkIsTheMeanOfTheRunsThereWere) {
  Measurements pooled;
  Measurements round;
  round.link = {.one_way = 3e9, .duplex = 1e9};
  round.link_runs = 1;
  Pool(pooled, round);
  Pool(pooled, Measurements{});  // iperf3 failed in this round
  round.link = {.one_way = 5e9, .duplex = 2e9};
  Pool(pooled, round);
  EXPECT_EQ(pooled.link_runs, 2u);
  EXPECT_DOUBLE_EQ(pooled.link.one_way, 4e9);
  EXPECT_DOUBLE_EQ(pooled.link.duplex, 1.5e9);
}

TEST(RenderReportTest, FiguresComeFromEveryRound) {
  BenchOptions options;
  options.daemons = 2;
  options.iters = 2;
  options.rounds = 2;
  options.baselines = {Baseline::kMpi};
  Measurements pooled;
  Pool(pooled, Round({10, 30}, {40, 80}, 0.4, "ok"));
  Pool(pooled, Round({30, 30}, {80, 80}, 0.4, "ok"));
  const std::string table = RenderReport(options, pooled);
  std::vector<std::string> row;
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    if (absl::StartsWith(line, "allreduce"))
      row = absl::StrSplit(line, ' ', absl::SkipWhitespace());
  }
  // op size p50 p99 algbw busbw cpu_s/GiB mpi_p50 xmpi
  ASSERT_EQ(row.size(), 9u) << table;
  EXPECT_EQ(row[2], "30.0");  // of 10, 30, 30, 30: 10 from the first round alone
  EXPECT_EQ(row[3], "30.0");
  // 0.8 s over 1 MiB x 2 ranks x 2 iterations x 2 rounds = 8 MiB.
  EXPECT_EQ(row[6], "102.40");
  EXPECT_EQ(row[7], "80.0");
  EXPECT_EQ(row[8], "2.67");
}

// send moves one message per pair of ranks: over 3 ranks one message of 1 MiB per iteration
// (the third rank sits out), where sendrecv moves three.
TEST(RenderReportTest, SendCountsTheMessagesItSends) {
  BenchOptions options;
  options.daemons = 3;
  options.iters = 4;
  Measurements measured;
  for (Op op : {Op::kSend, Op::kSendRecv}) {
    measured.cclo.timings[{op, 1 << 20}] = {10, 10, 10, 10};
    measured.cclo.cpu_seconds[{op, 1 << 20}] = 0.3;
  }
  const std::string table = RenderReport(options, measured);
  std::map<std::string, std::string> cpu;
  for (absl::string_view line : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    std::vector<std::string> row = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    ASSERT_EQ(row.size(), 7u) << table;
    cpu[row[0]] = row[6];
  }
  EXPECT_EQ(cpu["send"], "76.80");      // 0.3 s over 4 MiB
  EXPECT_EQ(cpu["sendrecv"], "25.60");  // 0.3 s over 12 MiB
}

// A nop has no output: the ranks report no check of it, and its check column says "-" (it
// said "ok").
TEST(RenderReportTest, NopsAreNotChecked) {
  BenchOptions options;
  options.daemons = 2;
  options.check = true;
  Measurements measured;
  for (Op op : {Op::kNop, Op::kNopGrpc}) measured.cclo.timings[{op, 0}] = {10, 10};
  measured.cclo.timings[kKey] = {10, 10};
  measured.cclo.checks[kKey] = "ok";
  const std::string table = RenderReport(options, measured);
  std::map<std::string, std::string> check;
  for (absl::string_view line : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    std::vector<std::string> row = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    ASSERT_EQ(row.size(), 8u) << table;
    check[row[0]] = row[7];
  }
  EXPECT_EQ(check["nop"], "-") << table;
  EXPECT_EQ(check["nop_grpc"], "-") << table;
  EXPECT_EQ(check["allreduce"], "ok") << table;
}

TEST(RenderGeomeansTest, AveragesEachStackOverTheSizesFromOneMiB) {
  Measurements measured;
  auto& ours = measured.cclo.timings;
  auto& mpi = measured.stacks[Baseline::kMpi];
  auto& gloo = measured.stacks[Baseline::kGloo];
  ours[{Op::kAllreduce, 512 << 10}] = {10};  // below 1 MiB: left out
  mpi[{Op::kAllreduce, 512 << 10}] = {1000};
  ours[{Op::kAllreduce, 1 << 20}] = {10};
  mpi[{Op::kAllreduce, 1 << 20}] = {20};
  gloo[{Op::kAllreduce, 1 << 20}] = {30};
  ours[{Op::kAllreduce, 4 << 20}] = {10, 10, 50};  // p50 10
  mpi[{Op::kAllreduce, 4 << 20}] = {80};
  ours[{Op::kSend, 1 << 20}] = {10};  // no baseline ran it
  const std::string table = RenderGeomeans(measured);
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    rows.push_back(absl::StrSplit(line, ' ', absl::SkipWhitespace()));
  }
  ASSERT_EQ(rows.size(), 2u) << table;
  EXPECT_EQ(rows[0], (std::vector<std::string>{"op", "sizes", "from", "to", "xmpi", "xgloo"}));
  // mpi: the geometric mean of 2 and 8; gloo lacks 4 MiB, so it has none.
  EXPECT_EQ(rows[1],
            (std::vector<std::string>{"allreduce", "2", "1048576", "4194304", "4.00", "-"}));
}

TEST(RenderGeomeansTest, NothingWithoutABaselineOrALargeSize) {
  Measurements measured;
  measured.cclo.timings[{Op::kAllreduce, 1 << 20}] = {10};
  EXPECT_EQ(RenderGeomeans(measured), "");
  measured.cclo.timings.clear();
  measured.cclo.timings[{Op::kAllreduce, 64 << 10}] = {10};
  measured.stacks[Baseline::kMpi][{Op::kAllreduce, 64 << 10}] = {20};
  EXPECT_EQ(RenderGeomeans(measured), "");
  // A stack with no times at a size has no mean either (not a mean of a zero p50).
  measured.cclo.timings[{Op::kAllreduce, 1 << 20}] = {10};
  measured.stacks[Baseline::kMpi][{Op::kAllreduce, 1 << 20}] = {};
  EXPECT_EQ(RenderGeomeans(measured), "");
}

}  // namespace
}  // namespace cclo::bench
