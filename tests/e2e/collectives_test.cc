// Real cclod processes on loopback and real client processes (cclo-run), one per rank;
// every collective (every root, in place or not, every datatype) is checked by the clients
// against a locally computed reference.
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
    std::vector<std::string> command = {Runfile("client/cclo-run"),
                                        "run",
                                        "--runtime-dir",
                                        placement[rank]->runtime_dir(),
                                        "--token",
                                        token,
                                        "--rank",
                                        absl::StrCat(rank),
                                        "--size",
                                        absl::StrCat(placement.size())};
    command.insert(command.end(), options.begin(), options.end());
    commands.push_back(std::move(command));
  }
  std::vector<ProcessResult> results = RunAll(commands, kRunTimeout);
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_FALSE(results[rank].timed_out) << "rank " << rank << " timed out";
    EXPECT_EQ(results[rank].exit_code, 0) << "rank " << rank << ":\n" << results[rank].output;
  }
}

// Every collective ("all" ends with a barrier, so no rank leaves while others still need it),
// rooted ones once per root.
const std::vector<std::string> kAllOps = {"--ops", "all",     "--root",
                                          "all",   "--sizes", "0,4,1K,64K,1M,3M"};

// kAllOps plus `extra`.
std::vector<std::string> AllOpsWith(const std::vector<std::string>& extra) {
  std::vector<std::string> options = kAllOps;
  options.insert(options.end(), extra.begin(), extra.end());
  return options;
}

TEST(CollectivesTest, TwoDaemonsFloat32) {
  Daemon a, b;
  RunRanks({&a, &b}, kAllOps);
}

TEST(CollectivesTest, TwoDaemonsInt32InPlace) {
  Daemon a, b;
  RunRanks({&a, &b}, AllOpsWith({"--datatype", "int32", "--in-place"}));
}

TEST(CollectivesTest, ThreeDaemons) {
  Daemon a, b, c;
  RunRanks({&a, &b, &c}, kAllOps);
}

TEST(CollectivesTest, ThreeDaemonsInPlace) {
  Daemon a, b, c;
  RunRanks({&a, &b, &c}, AllOpsWith({"--in-place", "--reduce-op", "max"}));
}

TEST(CollectivesTest, ThreeDaemonsEveryDatatype) {
  Daemon a, b, c;
  for (const char* datatype :
       {"int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"}) {
    SCOPED_TRACE(datatype);
    RunRanks({&a, &b, &c},
             {"--ops", "all", "--root", "all", "--sizes", "0,1K,64K", "--datatype", datatype});
  }
}

TEST(CollectivesTest, TwoRanksOnOneDaemon) {
  Daemon a;
  RunRanks({&a, &a}, kAllOps);
}

TEST(CollectivesTest, MixedPlacementFourRanksOnTwoDaemons) {
  Daemon a, b;
  RunRanks({&a, &b, &a, &b}, {"--ops", "all", "--root", "all", "--sizes", "7,1K,1M"});
}

TEST(CollectivesTest, SmallSegmentsSpanManySegments) {
  Daemon a("segment_bytes: 4096\nrx_pool_bytes: 65536\n");
  Daemon b("segment_bytes: 4096\nrx_pool_bytes: 65536\n");
  RunRanks({&a, &b}, {"--ops", "all", "--sizes", "4092,4096,4100,1M"});
}

}  // namespace
}  // namespace cclo::testing
