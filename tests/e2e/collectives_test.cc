// Real cclod processes on loopback and real client processes (cclo-run), one per rank;
// every op is checked by the clients against a locally computed reference.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(3);

/// Runs one cclo-run per rank; `placement[r]` is the daemon hosting rank r.
void RunRanks(const std::vector<Daemon*>& placement, const std::vector<std::string>& options) {
  const std::string token = NewToken(*placement[0]);
  std::vector<std::vector<std::string>> commands;
  for (size_t rank = 0; rank < placement.size(); ++rank) {
    std::vector<std::string> command = {Runfile("client/cclo-run"), "run",
                                        "--runtime-dir", placement[rank]->runtime_dir(),
                                        "--token", token,
                                        "--rank", absl::StrCat(rank),
                                        "--size", absl::StrCat(placement.size())};
    command.insert(command.end(), options.begin(), options.end());
    commands.push_back(std::move(command));
  }
  std::vector<ProcessResult> results = RunAll(commands, kRunTimeout);
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_FALSE(results[rank].timed_out) << "rank " << rank << " timed out";
    EXPECT_EQ(results[rank].exit_code, 0) << "rank " << rank << ":\n" << results[rank].output;
  }
}

const std::vector<std::string> kAllOps = {"--ops", "sendrecv,bcast,allreduce", "--sizes",
                                          "0,4,1K,64K,1M,3M"};

TEST(CollectivesTest, TwoDaemonsFloat32) {
  Daemon a, b;
  RunRanks({&a, &b}, kAllOps);
}

TEST(CollectivesTest, TwoDaemonsInt32) {
  Daemon a, b;
  std::vector<std::string> options = kAllOps;
  options.insert(options.end(), {"--datatype", "int32"});
  RunRanks({&a, &b}, options);
}

TEST(CollectivesTest, ThreeDaemons) {
  Daemon a, b, c;
  RunRanks({&a, &b, &c}, kAllOps);
}

TEST(CollectivesTest, TwoRanksOnOneDaemon) {
  Daemon a;
  RunRanks({&a, &a}, kAllOps);
}

TEST(CollectivesTest, MixedPlacementFourRanksOnTwoDaemons) {
  Daemon a, b;
  RunRanks({&a, &b, &a, &b}, {"--ops", "sendrecv,bcast,allreduce", "--sizes", "7,1K,1M"});
}

TEST(CollectivesTest, SmallSegmentsSpanManySegments) {
  Daemon a("segment_bytes: 4096\nrx_pool_bytes: 65536\n");
  Daemon b("segment_bytes: 4096\nrx_pool_bytes: 65536\n");
  RunRanks({&a, &b}, {"--ops", "sendrecv,bcast,allreduce", "--sizes", "4092,4096,4100,1M"});
}

}  // namespace
}  // namespace cclo::testing
