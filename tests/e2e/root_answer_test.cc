// A joining daemon checks its root's answer before it trusts it: a stand-in root answers
// every join at once with a rank table made from the joiner's own request.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "daemon/token.h"
#include "firmware/registry.h"
#include "hw/poe/wire.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"
#include "tests/loopback/loopback.h"

namespace cclo::testing {
namespace {

static_assert(firmware::kSelectionVersion == 1, "the expected message names selection 1");

/// A root daemon on loopback whose answer to a join is a table of `ranks` (rank numbers in
/// table order, each on the joiner's daemon) and a policy of `selection`.
class StandInRoot final : public cclo::v1::Peer::Service {
 public:
  StandInRoot(std::vector<uint32_t> ranks, uint32_t selection)
      : ranks_(std::move(ranks)), selection_(selection) {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  ~StandInRoot() override {
    released_.Notify();
    server_->Shutdown();
  }

  /// A token rooted here.
  std::string Token() const { return daemon::FormatToken(daemon::NewToken(address_)); }
  const std::string& address() const { return address_; }
  /// Gives every rank `address` as its data address instead of the joiner's.
  void ForgeDataAddress(std::string address) { forged_data_address_ = std::move(address); }
  /// Gives every rank but the joiner's `address` as its data address.
  void PlaceOtherRanksAt(std::string address) { others_data_address_ = std::move(address); }
  /// Answers every join with `status` instead of a table.
  void Refuse(grpc::Status status) { refusal_ = std::move(status); }
  /// Answers with data wire version `version` instead of this build's.
  void SetWireVersion(uint32_t version) { wire_version_ = version; }
  /// Sends `rule` in the policy.
  void AddRule(cclo::v1::PolicyRule rule) { rules_.push_back(std::move(rule)); }
  /// Answers no join until it goes away: a root that hangs.
  void Hang() { hang_ = true; }
  /// The timeout_ms of the last join that came.
  uint32_t last_timeout_ms() const { return last_timeout_ms_; }

  grpc::Status Join(grpc::ServerContext*, const cclo::v1::PeerJoinRequest* request,
                    cclo::v1::PeerJoinResponse* response) override {
    last_timeout_ms_ = request->timeout_ms();
    if (hang_) released_.WaitForNotification();
    if (!refusal_.ok()) return refusal_;
    for (uint32_t number : ranks_) {
      cclo::v1::RankInfo* rank = response->add_ranks();
      rank->set_rank(number);
      rank->set_daemon_address(request->daemon_address());
      rank->set_data_address(forged_data_address_.empty() ? request->data_address()
                                                          : forged_data_address_);
      if (number != request->rank() && !others_data_address_.empty()) {
        rank->set_data_address(others_data_address_);
      }
    }
    response->mutable_policy()->set_selection(selection_);
    response->mutable_policy()->set_wire_version(wire_version_);
    response->mutable_policy()->set_transport("tcp");
    for (const cclo::v1::PolicyRule& rule : rules_) {
      *response->mutable_policy()->mutable_policy()->add_rules() = rule;
    }
    return grpc::Status::OK;
  }

 private:
  const std::vector<uint32_t> ranks_;
  const uint32_t selection_;
  uint32_t wire_version_ = hw::poe::kWireVersion;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::string forged_data_address_;
  std::string others_data_address_;
  grpc::Status refusal_;
  std::vector<cclo::v1::PolicyRule> rules_;
  bool hang_ = false;
  absl::Notification released_;
  std::atomic<uint32_t> last_timeout_ms_ = 0;
};

// A root of selection 0, as a release from before selections were numbered answers: the
// join is refused with both selections named.
TEST(RootAnswerTest, ADaemonRefusesToJoinAtARootOfAnotherSelection) {
  StandInRoot root({0}, 0);
  const std::string token = root.Token();
  Daemon member;
  RawSession rank0(member.runtime_dir());
  const std::string refused =
      absl::StrCat("root daemon ", root.address(),
                   " chooses built-in algorithms by selection 0 (a release from before "
                   "selections were numbered) and this daemon by selection 1: all daemons of a "
                   "communicator must run releases of one selection");
  grpc::Status joined = rank0.Join(token, 0, 1);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << joined.error_message();
  EXPECT_EQ(joined.error_message(), refused);
  // The refused rank left: joining again is refused for the same reason, not as a rank
  // that already joined here.
  joined = rank0.Join(token, 0, 1);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << joined.error_message();
  EXPECT_EQ(joined.error_message(), refused);
}

// A root of another data wire version, whose data sessions would refuse this daemon's: the
// join is refused with both named. Version 0 is a release from before joins carried it (4
// and before); 6 the release before this one.
TEST(RootAnswerTest, ADaemonRefusesToJoinAtARootOfAnotherWireVersion) {
  Daemon member;
  RawSession rank0(member.runtime_dir());
  for (const auto& [version, spoken] : std::vector<std::pair<uint32_t, std::string>>{
           {0, "4 or older (a release from before joins carried it)"}, {6, "6"}}) {
    StandInRoot root({0}, firmware::kSelectionVersion);
    root.SetWireVersion(version);
    grpc::Status joined = rank0.Join(root.Token(), 0, 1);
    EXPECT_EQ(joined.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << joined.error_message();
    EXPECT_EQ(joined.error_message(),
              absl::StrCat("root daemon ", root.address(), " speaks data wire version ", spoken,
                           " and this daemon version 7: all daemons of a communicator must "
                           "speak one data wire version"));
  }
}

// A table whose positions are not its ranks is refused: positions index the ranks after.
TEST(RootAnswerTest, ARankTableOutOfOrderIsRefused) {
  StandInRoot root({1, 0}, firmware::kSelectionVersion);
  Daemon member;
  RawSession rank0(member.runtime_dir());
  grpc::Status joined = rank0.Join(root.Token(), 0, 2);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::INTERNAL) << joined.error_message();
  EXPECT_EQ(joined.error_message(), absl::StrCat("root daemon ", root.address(),
                                                 " answered with rank 1 at position 0 of its "
                                                 "rank table"));
}

// A join whose data session to another rank's daemon does not come up by the join's
// deadline (shorter than the handshake timeout) says which daemon that was.
TEST(RootAnswerTest, AJoinWhoseDataSessionIsNotUpByItsDeadlineNamesThePeer) {
  StandInRoot root({0, 1}, firmware::kSelectionVersion);
  // A listener that never accepts: a peer daemon whose data port hangs.
  std::string silent;
  const int listener = ListenLoopback(&silent);
  ASSERT_GE(listener, 0);
  root.PlaceOtherRanksAt(silent);
  Daemon member;
  RawSession rank0(member.runtime_dir());
  grpc::Status joined = rank0.Join(root.Token(), 0, 2, nullptr, 1000);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << joined.error_message();
  EXPECT_TRUE(absl::StrContains(
      joined.error_message(),
      absl::StrCat("data sessions to peer daemons ", silent, " were not up by the deadline")))
      << joined.error_message();
  close(listener);
}

// A client that asks for a longer join than its daemon's join_timeout_ms gets that limit:
// a root that does not answer holds the join (a thread, the tenant's quotas, the
// communicator's record on the daemon) no longer, and the root is asked for 9/10 of it.
TEST(RootAnswerTest, AJoinWaitsAtMostItsDaemonsJoinTimeout) {
  StandInRoot root({0, 1}, firmware::kSelectionVersion);
  root.Hang();
  Daemon member("join_timeout_ms: 1000\n");
  RawSession rank0(member.runtime_dir());
  grpc::Status joined = rank0.Join(root.Token(), 0, 2, nullptr, UINT32_MAX);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_TRUE(absl::StartsWith(joined.error_message(),
                               absl::StrCat("join at root daemon ", root.address(),
                                            " failed: no answer within the join timeout of ")))
      << joined.error_message();
  EXPECT_GE(root.last_timeout_ms(), 1u);
  EXPECT_LE(root.last_timeout_ms(), 900u);
}

// A client that goes away while its join waits for the root's answer ends the join then,
// not at its deadline: the thread and the tenant's quotas it held come back.
TEST(RootAnswerTest, AJoinEndsWithItsSession) {
  StandInRoot root({0, 1}, firmware::kSelectionVersion);
  root.Hang();
  Daemon member;
  RawSession rank0(member.runtime_dir());
  grpc::Status joined;
  std::thread joining([&] { joined = rank0.Join(root.Token(), 0, 2); });
  ASSERT_TRUE(WaitUntil([&] { return root.last_timeout_ms() != 0; }, absl::Seconds(20)));
  rank0.Detach();
  joining.join();
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_EQ(joined.error_message(), "session ended while joining");
}

// Addresses from the root go into logs and errors: one that is not host:port is refused.
TEST(RootAnswerTest, ARankTableWithAnAddressThatIsNotHostPortIsRefused) {
  StandInRoot root({0}, firmware::kSelectionVersion);
  root.ForgeDataAddress("127.0.0.1:1\n[error] forged:2");
  Daemon member;
  RawSession rank0(member.runtime_dir());
  grpc::Status joined = rank0.Join(root.Token(), 0, 1);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::INTERNAL) << joined.error_message();
  EXPECT_EQ(
      joined.error_message(),
      absl::StrCat("root daemon ", root.address(),
                   " gives rank 0 an unusable address '127.0.0.1:1\\n[error] forged:2' is not "
                   "host:port (printable characters without spaces, then a port from 1 to "
                   "65535)"));
}

// The root's refusal goes into the joiner's log and its client's error: escaped, and cut
// after 1 KiB.
TEST(RootAnswerTest, ARootsRefusalIsEscapedAndCut) {
  StandInRoot root({0}, firmware::kSelectionVersion);
  const std::string forged = "no\n[error] forged";
  root.Refuse(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, forged + std::string(2000, 'x')));
  Daemon member;
  RawSession rank0(member.runtime_dir());
  grpc::Status joined = rank0.Join(root.Token(), 0, 1);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::PERMISSION_DENIED) << joined.error_message();
  EXPECT_EQ(joined.error_message(),
            absl::StrCat("join at root daemon ", root.address(), " failed: no\\n[error] forged",
                         std::string(1024 - forged.size(), 'x'), "... (2017 bytes in all)"));
}

// So does a policy rule the joiner cannot follow.
TEST(RootAnswerTest, ARootsPolicyRuleIsEscapedAndCutInTheRefusal) {
  StandInRoot root({0}, firmware::kSelectionVersion);
  cclo::v1::PolicyRule rule;
  rule.set_collective(cclo::v1::ALLREDUCE);
  rule.set_algorithm("ring\n" + std::string(1000, 'x'));
  root.AddRule(rule);
  Daemon member;
  RawSession rank0(member.runtime_dir());
  grpc::Status joined = rank0.Join(root.Token(), 0, 1);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << joined.error_message();
  EXPECT_EQ(joined.error_message().find(absl::StrCat(
                "root daemon ", root.address(),
                " sent a policy this daemon cannot follow: rule 1: algorithm 'ring\\n",
                std::string(256 - 5, 'x'), "... (1005 bytes in all)' cannot serve allreduce; ")),
            0u)
      << joined.error_message();
}

}  // namespace
}  // namespace cclo::testing
