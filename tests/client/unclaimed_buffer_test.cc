// libcclo when the answer to an AllocBuffer is lost after cclod made the buffer and sent
// its fd on the attach socket (the RPC's deadline passed, its connection broke): the
// BUFFER frame that nobody will claim is closed and the buffer given back, with its quota.
// A proxy in front of the daemon's client.sock loses the answer; attach.sock is the
// daemon's own.

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "cclo/v1/client.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/client/sessions.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

// The buffer RPCs of a real cclod, passed on with the caller's metadata; the answer to
// the AllocBuffer after LoseNextAnswer() is replaced by UNAVAILABLE.
class LosingProxy final : public v1::Client::Service {
 public:
  explicit LosingProxy(const std::string& runtime_dir)
      : daemon_(v1::Client::NewStub(
            grpc::CreateChannel(absl::StrCat("unix:", runtime_dir, "/client.sock"),
                                grpc::InsecureChannelCredentials()))) {}

  void LoseNextAnswer() { lose_next_ = true; }
  // The id of the buffer whose answer was lost; 0 before.
  uint64_t lost_id() const { return lost_id_; }

  grpc::Status AllocBuffer(grpc::ServerContext* server, const v1::AllocBufferRequest* request,
                           v1::AllocBufferResponse* response) override {
    grpc::ClientContext context;
    PassOn(*server, context);
    const grpc::Status status = daemon_->AllocBuffer(&context, *request, response);
    if (!status.ok() || !lose_next_.exchange(false)) return status;
    lost_id_ = response->buffer_id();
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the proxy lost the answer");
  }

  grpc::Status FreeBuffer(grpc::ServerContext* server, const v1::FreeBufferRequest* request,
                          v1::FreeBufferResponse* response) override {
    grpc::ClientContext context;
    PassOn(*server, context);
    return daemon_->FreeBuffer(&context, *request, response);
  }

 private:
  // The session token and the deadline of the caller's RPC.
  static void PassOn(const grpc::ServerContext& server, grpc::ClientContext& client) {
    auto token = server.client_metadata().find("cclo-session");
    if (token != server.client_metadata().end()) {
      client.AddMetadata("cclo-session", std::string(token->second.data(), token->second.size()));
    }
    client.set_deadline(server.deadline());
  }

  const std::unique_ptr<v1::Client::Stub> daemon_;
  std::atomic<bool> lose_next_ = false;
  std::atomic<uint64_t> lost_id_ = 0;
};

// Whether this process holds an fd of the memfd cclod made for buffer `id`.
bool HoldsBufferFd(uint64_t id) {
  const std::string name = absl::StrCat("/memfd:cclo-buffer-", id, " (deleted)");
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    if (std::filesystem::read_symlink(entry.path(), error).string() == name) return true;
  }
  return false;
}

TEST(UnclaimedBufferTest, ABufferWhoseAnswerWasLostIsClosedAndGivenBack) {
  testing::Daemon daemon("tenants:\n  - name: default\n    quotas: {buffers: 2}\n");
  LosingProxy proxy(daemon.runtime_dir());
  testing::StandInClientSocket stand_in(daemon.runtime_dir(), proxy);
  std::unique_ptr<Client> client = testing::AttachOrDie(stand_in.runtime_dir());
  ASSERT_NE(client, nullptr);

  proxy.LoseNextAnswer();
  absl::StatusOr<Buffer> lost = client->AllocBuffer(4096);
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  ASSERT_NE(proxy.lost_id(), 0u);
  // The next allocation reads the lost buffer's frame before its own.
  absl::StatusOr<Buffer> first = client->AllocBuffer(4096);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(HoldsBufferFd(proxy.lost_id()));
  // The tenant has room for two buffers: the lost one no longer counts.
  absl::StatusOr<Buffer> second = client->AllocBuffer(4096);
  EXPECT_TRUE(second.ok()) << second.status();
}

}  // namespace
}  // namespace cclo
