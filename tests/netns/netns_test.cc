// Three hosts as network namespaces joined by a bridge, one cclod in each listening on its
// host's address, cclo-run clients inside the hosts: every collective cclo-run checks runs
// across the hosts over real (virtual) links instead of loopback, communicators form again
// once a silent partition of a host's link ends, and a one-way partition ends every rank's
// op naming a peer daemon, and a metrics_host naming only IPv6 addresses in a host's
// /etc/hosts, or a name that does not resolve, is refused at start. Skipped with the reason where
// namespaces cannot be made.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cclo/v1/admin.pb.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/pairs.h"
#include "tests/netns/bridged_hosts.h"

namespace cclo::testing {
namespace {

constexpr int kHosts = 3;
constexpr absl::Duration kRunTimeout = absl::Minutes(3);

// Every op `cclo-run run --ops` accepts (sendrecv and every collective).
const std::string kEveryOp = "all";

class NetnsTest : public ::testing::Test {
 protected:
  /// Every daemon gets `daemon_config` (YAML lines).
  explicit NetnsTest(std::string daemon_config = "") : daemon_config_(std::move(daemon_config)) {}

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<BridgedHosts>> hosts = BridgedHosts::Create(kHosts);
    if (absl::IsFailedPrecondition(hosts.status())) {
      GTEST_SKIP() << "skipped: " << hosts.status().message();
    }
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    hosts_ = *std::move(hosts);
    for (int host = 0; host < kHosts; ++host) {
      daemons_.push_back(
          std::make_unique<Daemon>(daemon_config_, hosts_->Inside(host), hosts_->address(host)));
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

  /// One cclo-run command per rank inside the host `placement[rank]`, all with `options`.
  std::vector<std::vector<std::string>> RankCommands(const std::vector<int>& placement,
                                                     const std::vector<std::string>& options) {
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
    return commands;
  }

  /// One cclo-run per rank inside the host `placement[rank]`, all with `options`; every rank
  /// must finish OK.
  void RunRanks(const std::vector<int>& placement, const std::vector<std::string>& options) {
    std::vector<ProcessResult> results = RunAll(RankCommands(placement, options), kRunTimeout);
    for (size_t rank = 0; rank < results.size(); ++rank) {
      EXPECT_FALSE(results[rank].timed_out) << "rank " << rank << " timed out";
      EXPECT_EQ(results[rank].exit_code, 0) << "rank " << rank << ":\n" << results[rank].output;
    }
  }

  /// Starts cclod inside host 0 with metrics_host node0, the host's /etc files given as
  /// (name, text), for a start it refuses; `exit_code` and `reason` are what it must say.
  void ExpectMetricsOnNode0Refused(
      const std::vector<std::pair<std::string, std::string>>& etc_files, int exit_code,
      const std::string& reason) {
    for (const auto& [name, text] : etc_files) {
      ASSERT_TRUE(hosts_->SetEtcFile(0, name, text).ok()) << name;
    }
    const ProcessResult result = RunCclod("metrics_host: node0\n", hosts_->Inside(0));
    EXPECT_EQ(result.exit_code, exit_code) << result.output;
    EXPECT_TRUE(absl::StrContains(result.output, reason)) << result.output;
  }

  // Declared first so that it goes last: the daemons stop before their hosts are deleted.
  std::unique_ptr<BridgedHosts> hosts_;
  std::vector<std::unique_ptr<Daemon>> daemons_;
  const std::string daemon_config_;
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
// cut off; here a rank of another communicator waits at the root throughout, so that the
// connection is there to drop. Once the link is back, a new communicator across it forms:
// its join dials the root anew instead of failing at once on the old connection
// ('recvmsg:Connection reset by peer'), which made every rank wait for it until the join
// timeout.
TEST_F(NetnsTest, ACommunicatorFormsAfterAPartitionOutlastedTheRootsConnection) {
  RunRanks({0, 1}, {"--ops", "allreduce", "--sizes", "1K"});
  // Rank 1 of a communicator whose rank 0 never comes: it waits at the root, on host 0.
  Process waiting(RankCommands({0, 1}, {"--join-timeout", "300"})[1]);
  ASSERT_TRUE(WaitUntil([&] { return PeerPortConnected(0, 1); }, kRunTimeout)) << waiting.Output();
  ASSERT_TRUE(hosts_->SetLink(1, false).ok());
  EXPECT_TRUE(WaitUntil([&] { return !PeerPortConnected(0, 1); }, absl::Minutes(2)));
  ASSERT_TRUE(hosts_->SetLink(1, true).ok());
  RunRanks({0, 1}, {"--ops", "allreduce", "--sizes", "1K"});
}

// A metrics_host that is a name with only IPv6 addresses (here in the host's /etc/hosts) is
// refused at start naming it, as an IPv6 address is: the metrics' HTTP server has no IPv6
// and takes a name's IPv4 addresses only (the start failed 'null context when constructing
// CivetServer. Possible problem binding to port.' with exit code 1, which systemd retries).
TEST_F(NetnsTest, MetricsOnANameWithOnlyIpv6AddressesAreRefusedAtStart) {
  ExpectMetricsOnNode0Refused(
      {{"hosts", "127.0.0.1 localhost\nfd00::1 node0\n"}, {"nsswitch.conf", "hosts: files\n"}}, 2,
      "cannot serve metrics on node0:0, a name with only IPv6 addresses: the HTTP server "
      "(civetweb) was built without IPv6; set metrics_host to an IPv4 address");
}

// Where the lookup of a name's IPv4 addresses fails for now (here /etc/hosts has only an
// IPv6 one, and the name server cannot be reached), a later start may find one: a failure
// to retry, not a name with only IPv6 addresses (refused so, exit code 2, which systemd
// does not retry).
TEST_F(NetnsTest, MetricsOnANameWhoseIpv4LookupFailsForNowMayStartLater) {
  ExpectMetricsOnNode0Refused({{"hosts", "127.0.0.1 localhost\nfd00::1 node0\n"},
                               {"nsswitch.conf", "hosts: files dns\n"},
                               {"resolv.conf", "nameserver 192.0.2.53\n"}},
                              1,
                              "cannot serve metrics on node0:0: cannot resolve 'node0': "
                              "Temporary failure in name resolution");
}

// A metrics_host that is a name no lookup finds (here one that only /etc/hosts would know,
// which does not) is refused at start naming it: the start failed as above, exit code 1.
TEST_F(NetnsTest, MetricsOnANameThatDoesNotResolveAreRefusedAtStart) {
  ExpectMetricsOnNode0Refused(
      {{"hosts", "127.0.0.1 localhost\n"}, {"nsswitch.conf", "hosts: files\n"}}, 2,
      "cannot serve metrics on node0:0: cannot resolve 'node0': Name or service not known");
}

// Daemons that lose a silent peer daemon after the shortest peer timeout.
class NetnsShortPeerTimeoutTest : public NetnsTest {
 protected:
  NetnsShortPeerTimeoutTest() : NetnsTest("peer_timeout_ms: 1000\n") {}
};

// A one-way partition in the middle of a large allreduce over the three hosts: host 2 hears
// nothing (a switch drops what goes to it), while what it sends still arrives and no reset
// reaches anyone. Every rank's op ends, with an error that names the peer daemon its daemon
// lost, or the one that broke the communicator or left it after losing a peer; once the
// partition heals, a new communicator over the three hosts works, and none of either stays.
TEST_F(NetnsShortPeerTimeoutTest, AOneWayPartitionEndsEveryRanksOpNamingThePeer) {
  std::vector<std::unique_ptr<Process>> ranks;
  for (std::vector<std::string>& command : RankCommands(
           {0, 1, 2},
           {"--ops", "allreduce", "--sizes", "32M", "--iters", "1000000", "--op-timeout", "60"})) {
    ranks.push_back(std::make_unique<Process>(command));
  }
  // Cut once the communicator has run an allreduce: the ranks are in the next one.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto comms = AdminJson<cclo::v1::ListCommunicatorsResponse>(*daemons_[0], {"comms"});
        return comms.communicators_size() == 1 && comms.communicators(0).ops_completed() >= 1;
      },
      kRunTimeout))
      << ranks[0]->Output();
  ASSERT_TRUE(hosts_->SetInbound(2, false).ok());
  for (int rank = 0; rank < kHosts; ++rank) {
    ProcessResult result = ranks[rank]->Wait(kRunTimeout);
    EXPECT_FALSE(result.timed_out) << "rank " << rank << ":\n" << result.output;
    EXPECT_EQ(result.exit_code, 1) << "rank " << rank << ":\n" << result.output;
    // The op fails for a heartbeat missed across the cut (host 2 hears nobody; 0 and 1
    // soon hear nothing new from 2, whose sends go unacknowledged), naming first the peer
    // daemon that ended it: one its daemon lost, one that broke the communicator for a
    // peer it lost, or one whose rank left for that (rank r runs on host r).
    EXPECT_TRUE(
        absl::StrContains(result.output, "heartbeat missed: nothing came from peer daemon "))
        << "rank " << rank << ":\n"
        << result.output;
    bool named = false;
    for (int peer = 0; peer < kHosts; ++peer) {
      const std::string& address = daemons_[peer]->data_address();
      for (const std::string& naming :
           {absl::StrCat("lost peer daemon ", address, " (rank ", peer, ")"),
            absl::StrCat("peer daemon ", address, " broke the communicator: "),
            absl::StrCat("rank ", peer, " on peer daemon ", address, " left: ")}) {
        named |= peer != rank && absl::StrContains(result.output, absl::StrCat(" bytes: ", naming));
      }
    }
    EXPECT_TRUE(named) << "rank " << rank << ":\n" << result.output;
  }
  ASSERT_TRUE(hosts_->SetInbound(2, true).ok());
  RunRanks({0, 1, 2}, {"--ops", "allreduce", "--sizes", "32M"});
  for (int host = 0; host < kHosts; ++host) {
    EXPECT_TRUE(WaitUntil(
        [&] {
          return AdminJson<cclo::v1::ListCommunicatorsResponse>(*daemons_[host], {"comms"})
                     .communicators_size() == 0;
        },
        kRunTimeout))
        << "host " << host;
  }
}

}  // namespace
}  // namespace cclo::testing
