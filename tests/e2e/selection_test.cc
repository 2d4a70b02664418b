// A daemon refuses to join a communicator whose root runs another built-in algorithm
// selection (firmware kSelectionVersion): a stand-in root that answers every join with its
// rank table and a policy without a selection, as a release from before selections were
// numbered does, gets the join refused with both selections named.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "daemon/token.h"
#include "firmware/registry.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

static_assert(firmware::kSelectionVersion == 1, "the expected message names selection 1");

/// A root daemon of selection 0: it admits every rank at once, alone in its communicator.
class OldRoot final : public cclo::v1::Peer::Service {
 public:
  grpc::Status Join(grpc::ServerContext*, const cclo::v1::PeerJoinRequest* request,
                    cclo::v1::PeerJoinResponse* response) override {
    cclo::v1::RankInfo* rank = response->add_ranks();
    rank->set_rank(request->rank());
    rank->set_daemon_address(request->daemon_address());
    rank->set_data_address(request->data_address());
    response->mutable_policy()->set_transport("tcp");
    return grpc::Status::OK;
  }
};

TEST(SelectionTest, ADaemonRefusesToJoinAtARootOfAnotherSelection) {
  OldRoot root;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&root);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  const std::string root_address = absl::StrCat("127.0.0.1:", port);
  const std::string token = daemon::FormatToken(daemon::NewToken(root_address));

  Daemon member;
  RawSession rank0(member.runtime_dir());
  const std::string refused =
      absl::StrCat("root daemon ", root_address,
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
  server->Shutdown();
}

}  // namespace
}  // namespace cclo::testing
