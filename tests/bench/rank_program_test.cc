// The baselines' rank loop: with --check a stack's wrong result ends the sweep naming it, and
// a right one passes; without --check nothing is judged.
#include "bench/rank_program.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace cclo::bench {
namespace {

// One rank alone: allreduce's result is its input, and `wrong` leaves one element out.
struct OneRank {
  std::vector<float> send = std::vector<float>(256), recv = std::vector<float>(256);
  bool wrong = false;

  RankStack Stack() {
    RankStack stack;
    stack.send = send.data();
    stack.recv = recv.data();
    stack.run = [this](Op, uint64_t count) {
      std::copy_n(send.begin(), count - (wrong ? 1 : 0), recv.begin());
    };
    stack.barrier = [] {};
    stack.report = [](Op, uint64_t, const std::vector<double>&) {};
    return stack;
  }
};

RankArguments Arguments(bool check) {
  return RankArguments{
      .ops = "allreduce", .sizes = "8,1024", .warmup = 1, .iters = 2, .check = check};
}

TEST(RankSweepTest, CheckNamesAWrongResult) {
  OneRank rank;
  rank.wrong = true;
  absl::Status status = RunRankSweep(Arguments(true), rank.Stack());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StartsWith(status.message(), "allreduce 8: rank 0 index 1 expected "))
      << status;
  EXPECT_TRUE(absl::StrContains(status.message(), " got 1048576")) << status;  // the sentinel
}

TEST(RankSweepTest, CheckPassesARightResult) {
  OneRank rank;
  EXPECT_TRUE(RunRankSweep(Arguments(true), rank.Stack()).ok());
}

TEST(RankSweepTest, WithoutCheckNothingIsJudged) {
  OneRank rank;
  rank.wrong = true;
  EXPECT_TRUE(RunRankSweep(Arguments(false), rank.Stack()).ok());
}

}  // namespace
}  // namespace cclo::bench
