// `ccloctl comms destroy` against real daemons: the operator takes a communicator down on
// one daemon; ops of its ranks there and on the other daemons fail with the reason, the
// tenant's quota comes back at once, and every other communicator keeps working.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cclo/v1/admin.pb.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/pairs.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

/// How much of its communicators quota the default tenant of `daemon` uses.
uint64_t CommunicatorsUsed(const Daemon& daemon) {
  const auto tenants = AdminJson<cclo::v1::ListTenantsResponse>(daemon, {"tenants"});
  for (const cclo::v1::QuotaUse& quota : tenants.tenants(0).quotas()) {
    if (quota.name() == "communicators") return quota.used();
  }
  ADD_FAILURE() << "no communicators quota in " << tenants.DebugString();
  return 0;
}

TEST(CommsDestroyTest, FailsOpsHereAndOnPeersReleasesQuotaAndKeepsOthersServing) {
  Daemon a, b;
  RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  const auto first = AdminJson<cclo::v1::ListCommunicatorsResponse>(a, {"comms"});
  ASSERT_EQ(first.communicators_size(), 1);
  const std::string id = first.communicators(0).comm_id();
  // A second communicator of the same two daemons, which the destroy must leave alone.
  RawSession other0(a.runtime_dir()), other1(b.runtime_dir());
  auto [other_handle0, other_handle1] = JoinPair(other0, other1);
  EXPECT_EQ(CommunicatorsUsed(a), 2u);

  // Both ranks wait in a receive from the other, which never sends.
  const uint64_t buffer0 = rank0.Alloc(4096), buffer1 = rank1.Alloc(4096);
  const uint64_t op0 = Submit(rank0, RecvRequest(handle0, buffer0, 1));
  const uint64_t op1 = Submit(rank1, RecvRequest(handle1, buffer1, 0));

  // The operator destroys it on a, naming it by a prefix.
  const auto destroyed = AdminJson<cclo::v1::AdminDestroyCommunicatorResponse>(
      a, {"comms", "destroy", id.substr(0, 10)});
  EXPECT_EQ(destroyed.comm_id(), id);
  EXPECT_EQ(destroyed.tenant(), "default");
  ASSERT_EQ(destroyed.local_ranks_size(), 1);
  EXPECT_EQ(destroyed.local_ranks(0), 0u);
  EXPECT_EQ(destroyed.ops_failed(), 1u);
  EXPECT_EQ(destroyed.quota_released(), 1u);

  // The op in flight on a fails with the reason alone, as an op a break cuts off does
  // (operations.md said it failed as later ops do); the peer rank's op on b names the
  // daemon that broke the communicator and why.
  const cclo::v1::WaitResponse here = WaitOp(rank0, op0);
  EXPECT_EQ(here.code(), grpc::StatusCode::UNAVAILABLE) << here.message();
  EXPECT_EQ(here.message(), "destroyed by the operator");
  const cclo::v1::WaitResponse peer = WaitOp(rank1, op1);
  EXPECT_EQ(peer.code(), grpc::StatusCode::UNAVAILABLE) << peer.message();
  EXPECT_EQ(peer.message(), absl::StrCat("peer daemon ", a.data_address(),
                                         " broke the communicator: destroyed by the operator"));

  // Later ops on it fail at once with the reason; a shows it broken and the tenant's quota
  // already given back, while the handle lives on.
  grpc::Status later = rank0.Run(RecvRequest(handle0, buffer0, 1));
  EXPECT_EQ(later.error_code(), grpc::StatusCode::UNAVAILABLE) << later.error_message();
  EXPECT_EQ(later.error_message(),
            absl::StrCat("communicator ", id, " is broken: destroyed by the operator"));
  const auto broken = AdminJson<cclo::v1::ShowCommunicatorResponse>(a, {"comms", "show", id});
  EXPECT_EQ(broken.state(), "broken");
  EXPECT_EQ(broken.error(), "destroyed by the operator");
  EXPECT_EQ(broken.ops_failed(), 1u);
  EXPECT_EQ(CommunicatorsUsed(a), 1u);
  // Destroying it again gives back nothing more.
  const auto again =
      AdminJson<cclo::v1::AdminDestroyCommunicatorResponse>(a, {"comms", "destroy", id});
  EXPECT_EQ(again.quota_released(), 0u);
  EXPECT_EQ(CommunicatorsUsed(a), 1u);

  // The other communicator works on; destroying the dead handle is fine and gives back
  // nothing twice; destroying it again through ccloctl finds nothing.
  ExpectPairAllreduce(other0, other_handle0, other1, other_handle1);
  grpc::Status status = rank0.Destroy(handle0);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(CommunicatorsUsed(a), 1u);
  ProcessResult gone = Ccloctl(a, {"comms", "destroy", id});
  EXPECT_EQ(gone.exit_code, 1) << gone.output;
  EXPECT_NE(gone.output.find("DestroyCommunicator at unix:" + a.runtime_dir() +
                             "/admin.sock: no communicator " + id + " on this daemon"),
            std::string::npos)
      << gone.output;
  ExpectPairAllreduce(other0, other_handle0, other1, other_handle1);
}

// A rank still waiting at its root daemon for the others ends its join with the reason:
// it waited out its join timeout, then failed naming the ranks that had not joined.
TEST(CommsDestroyTest, EndsAJoinWaitingAtTheRoot) {
  Daemon a, root;
  RawSession rank0(a.runtime_dir()), maker(root.runtime_dir());
  const std::string token = maker.NewToken();
  grpc::Status joined;
  std::thread joining([&] { joined = rank0.Join(token, 0, 2); });
  std::string id;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto comms = AdminJson<cclo::v1::ListCommunicatorsResponse>(a, {"comms"});
        if (comms.communicators_size() == 1) id = comms.communicators(0).comm_id();
        return !id.empty();
      },
      absl::Seconds(20)));
  const auto destroyed =
      AdminJson<cclo::v1::AdminDestroyCommunicatorResponse>(a, {"comms", "destroy", id});
  EXPECT_EQ(destroyed.comm_id(), id);
  joining.join();
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_EQ(joined.error_message(),
            absl::StrCat("communicator ", id, " is broken: destroyed by the operator"));
  EXPECT_EQ(CommunicatorsUsed(a), 0u);
}

TEST(CommsDestroyTest, RefusesAmbiguousAndBadIdsAndDestroysOnlyTheOneNamed) {
  Daemon daemon;
  RawSession session(daemon.runtime_dir());
  // Seventeen one-rank communicators: two of them share their first hex digit.
  for (int i = 0; i < 17; ++i) {
    ASSERT_TRUE(session.Join(session.NewToken(), 0, 1).ok());
  }
  const auto before = AdminJson<cclo::v1::ListCommunicatorsResponse>(daemon, {"comms"});
  ASSERT_EQ(before.communicators_size(), 17);
  std::map<char, int> first_digits;
  for (const auto& comm : before.communicators()) ++first_digits[comm.comm_id()[0]];
  char shared = 0;
  for (const auto& [digit, count] : first_digits) {
    if (count > 1) shared = digit;
  }

  ProcessResult ambiguous = Ccloctl(daemon, {"comms", "destroy", std::string(1, shared)});
  EXPECT_EQ(ambiguous.exit_code, 1) << ambiguous.output;
  EXPECT_NE(ambiguous.output.find(
                absl::StrCat("communicator id prefix '", std::string(1, shared), "' matches ")),
            std::string::npos)
      << ambiguous.output;
  ProcessResult not_hex = Ccloctl(daemon, {"comms", "destroy", "0x12"});
  EXPECT_EQ(not_hex.exit_code, 1) << not_hex.output;
  EXPECT_NE(not_hex.output.find("communicator id '0x12' is not a hex id or prefix"),
            std::string::npos)
      << not_hex.output;
  ProcessResult missing = Ccloctl(daemon, {"comms", "destroy"});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("id is required"), std::string::npos) << missing.output;
  const auto unchanged = AdminJson<cclo::v1::ListCommunicatorsResponse>(daemon, {"comms"});
  for (const auto& comm : unchanged.communicators()) {
    EXPECT_EQ(comm.state(), "ready") << comm.comm_id();
  }

  const std::string named = before.communicators(3).comm_id();
  ProcessResult table = Ccloctl(daemon, {"comms", "destroy", named});
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("comm_id         " + named + "\n"), std::string::npos)
      << table.output;
  EXPECT_NE(table.output.find("quota_released  1\n"), std::string::npos) << table.output;
  const auto after = AdminJson<cclo::v1::ListCommunicatorsResponse>(daemon, {"comms"});
  ASSERT_EQ(after.communicators_size(), 17);
  for (const auto& comm : after.communicators()) {
    EXPECT_EQ(comm.state(), comm.comm_id() == named ? "broken" : "ready") << comm.comm_id();
  }
}

}  // namespace
}  // namespace cclo::testing
