// Three hosts as network namespaces joined by a bridge, one cclod in each listening on its
// host's address, cclo-run clients inside the hosts: every collective cclo-run checks runs
// across the hosts over real (virtual) links instead of loopback, and communicators form
// again once a silent partition of a host's link ends. Skipped with the reason where
// namespaces cannot be made.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/cluster.h"
#include "tests/netns/bridged_hosts.h"

namespace cclo::testing {
namespace {

constexpr int kHosts = 3;
constexpr absl::Duration kRunTimeout = absl::Minutes(3);

// Every op `cclo-run run --ops` accepts (sendrecv and every collective).
const std::string kEveryOp = "all";

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<BridgedHosts>> hosts = BridgedHosts::Create(kHosts);
    if (absl::IsFailedPrecondition(hosts.status())) {
      GTEST_SKIP() << "skipped: " << hosts.status().message();
    }
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    hosts_ = *std::move(hosts);
    for (int host = 0; host < kHosts; ++host) {
      daemons_.push_back(std::make_unique<Daemon>("", hosts_->Inside(host), hosts_->address(host)));
      EXPECT_EQ(daemons_.back()->peer_address().rfind(hosts_->address(host) + ":", 0), 0u)
          << daemons_.back()->peer_address();
    }
  }

  /// Whether host `host`'s daemon has a connection from host `peer` on its Peer port.
  bool PeerPortConnected(int host, int peer) {
    const std::string& address = daemons_[host]->peer_address();
    ProcessResult sockets =
        Process(
            hosts_->Inside(
                host, {"ss", "-Htn", "state", "established",
                       absl::StrCat("( sport = :", address.substr(address.rfind(':') + 1), " )")}))
            .Wait(kRunTimeout);
    EXPECT_EQ(sockets.exit_code, 0) << sockets.output;
    return absl::StrContains(sockets.output, hosts_->address(peer));
  }

  /// One cclo-run per rank inside the host `placement[rank]`, all with `options`; every rank
  /// must finish OK.
  void RunRanks(const std::vector<int>& placement, const std::vector<std::string>& options) {
    const std::string token = NewToken(*daemons_[placement[0]]);
    std::vector<std::vector<std::string>> commands;
    for (size_t rank = 0; rank < placement.size(); ++rank) {
      std::vector<std::string> command = {Runfile("client/cclo-run"),
                                          "run",
                                          "--runtime-dir",
                                          daemons_[placement[rank]]->runtime_dir(),
                                          "--token",
                                          token,
                                          "--rank",
                                          absl::StrCat(rank),
                                          "--size",
                                          absl::StrCat(placement.size())};
      command.insert(command.end(), options.begin(), options.end());
      commands.push_back(hosts_->Inside(placement[rank], command));
    }
    std::vector<ProcessResult> results = RunAll(commands, kRunTimeout);
    for (size_t rank = 0; rank < results.size(); ++rank) {
      EXPECT_FALSE(results[rank].timed_out) << "rank " << rank << " timed out";
      EXPECT_EQ(results[rank].exit_code, 0) << "rank " << rank << ":\n" << results[rank].output;
    }
  }

  // Declared first so that it goes last: the daemons stop before their hosts are deleted.
  std::unique_ptr<BridgedHosts> hosts_;
  std::vector<std::unique_ptr<Daemon>> daemons_;
};

TEST_F(NetnsTest, EveryCollectiveOneRankPerHost) {
  RunRanks({0, 1, 2}, {"--ops", kEveryOp, "--sizes", "0,4,1K,64K,1M,3M", "--root", "all"});
}

TEST_F(NetnsTest, EveryCollectiveTwoRanksPerHostInt32) {
  // Ranks 0 and 3 share host 0, and so on: local copies and links in one communicator.
  RunRanks({0, 1, 2, 0, 1, 2},
           {"--ops", kEveryOp, "--sizes", "7,1K,1M", "--datatype", "int32", "--root", "4"});
}

// A partition that outlasts the root daemon's keepalive: the root drops the joining
// daemon's connection to its Peer port, which the joining daemon cannot learn while it is
// cut off. Once the link is back, a new communicator across it forms: its join dials the
// root anew instead of failing at once on the old connection ('recvmsg:Connection reset by
// peer'), which made every rank wait for it until the join timeout.
TEST_F(NetnsTest, ACommunicatorFormsAfterAPartitionOutlastedTheRootsConnection) {
  RunRanks({0, 1}, {"--ops", "allreduce", "--sizes", "1K"});
  ASSERT_TRUE(hosts_->SetLink(1, false).ok());
  EXPECT_TRUE(WaitUntil([&] { return !PeerPortConnected(0, 1); }, absl::Minutes(2)));
  ASSERT_TRUE(hosts_->SetLink(1, true).ok());
  RunRanks({0, 1}, {"--ops", "allreduce", "--sizes", "1K"});
}

}  // namespace
}  // namespace cclo::testing
