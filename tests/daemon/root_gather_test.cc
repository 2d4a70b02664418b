#include "daemon/root_gather.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/token.h"
#include "firmware/registry.h"

namespace cclo::daemon {
namespace {

// A join of rank 0 of a one-rank communicator, with its proof, from a daemon of `selection`.
cclo::v1::PeerJoinRequest JoinFrom(const CommToken& token, uint32_t selection) {
  cclo::v1::PeerJoinRequest request;
  request.set_version(1);
  request.set_selection(selection);
  request.set_comm_id(std::string(token.id.begin(), token.id.end()));
  request.set_rank(0);
  request.set_size(1);
  request.set_daemon_address("10.0.0.2:7470");
  request.set_data_address("10.0.0.2:7471");
  request.set_proof(Proof(token.secret, JoinMessage(request)));
  return request;
}

cclo::v1::CommPolicy RootPolicy() {
  cclo::v1::CommPolicy policy;
  policy.set_root_address("10.0.0.1:7470");
  policy.set_selection(firmware::kSelectionVersion);
  return policy;
}

TEST(RootGatherTest, AJoinFromADaemonOfAnotherSelectionIsRefusedNamingBoth) {
  RootGather gather;
  const CommToken token = NewToken("10.0.0.1:7470");
  gather.Register(token.id, token.secret, RootPolicy());
  for (uint32_t other : {0u, firmware::kSelectionVersion + 1}) {
    absl::StatusOr<cclo::v1::PeerJoinResponse> joined =
        gather.Join(JoinFrom(token, other), absl::Now() + absl::Seconds(30));
    ASSERT_FALSE(joined.ok());
    EXPECT_EQ(joined.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(
        joined.status().message(),
        absl::StrCat("rank 0's daemon at 10.0.0.2:7470 chooses built-in algorithms by "
                     "selection ",
                     other, other == 0 ? " (a release from before selections were numbered)" : "",
                     " and this daemon by selection ", firmware::kSelectionVersion,
                     ": all daemons of a communicator must run releases of one "
                     "selection"));
  }
  // The refused joins took no rank: one of this selection still joins, and learns it.
  absl::StatusOr<cclo::v1::PeerJoinResponse> joined =
      gather.Join(JoinFrom(token, firmware::kSelectionVersion), absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->ranks_size(), 1);
  EXPECT_EQ(joined->policy().selection(), firmware::kSelectionVersion);
}

TEST(RootGatherTest, SameSelectionNamesTheOtherDaemon) {
  EXPECT_TRUE(SameSelection(firmware::kSelectionVersion, "root daemon a:1").ok());
  const absl::Status old = SameSelection(0, "root daemon a:1");
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(old.message(),
                               "root daemon a:1 chooses built-in algorithms by selection 0 (a "
                               "release from before selections were numbered)"))
      << old.message();
}

}  // namespace
}  // namespace cclo::daemon
