// The Peer service on a real gRPC server: what it logs of a refused join.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "daemon/root_gather.h"
#include "daemon/services.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

using ::testing::Contains;
using ::testing::StartsWith;

// Anyone who reaches the peer port may send a join: the address it gives for itself is
// escaped in the log line of the refusal, so it cannot forge lines.
TEST(PeerServiceTest, ARefusedJoinsAddressIsEscapedInTheLog) {
  auto log = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
  spdlog::default_logger()->sinks().push_back(log);
  RootGather gather(absl::Seconds(60));
  PeerService service(&gather);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  std::unique_ptr<cclo::v1::Peer::Stub> stub = cclo::v1::Peer::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  cclo::v1::PeerJoinRequest request;
  request.set_version(1);
  request.set_comm_id(std::string(16, '\x01'));
  request.set_size(2);
  request.set_timeout_ms(1000);
  request.set_daemon_address("10.0.0.9:7470\n[warning] forged line");
  cclo::v1::PeerJoinResponse response;
  grpc::ClientContext context;
  const grpc::Status joined = stub->Join(&context, request, &response);
  server->Shutdown();  // the refusal was logged before it was answered
  spdlog::default_logger()->sinks().pop_back();
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::NOT_FOUND) << joined.error_message();

  std::vector<std::string> lines;
  for (const spdlog::details::log_msg_buffer& line : log->last_raw()) {
    lines.emplace_back(line.payload.data(), line.payload.size());
  }
  EXPECT_THAT(lines,
              Contains(StartsWith(
                  "join of rank 0 from peer daemon 10.0.0.9:7470\\n[warning] forged line (")));
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace cclo::daemon
