// libcclo when its own cclod goes away, killed (SIGKILL) or stopped (SIGTERM), at each point
// of a session's life: every call returns at once with UNAVAILABLE naming the daemon's
// attach socket, the buffers the application holds stay readable, and a new Client of the
// same process attaches to the daemon once it is back.
#include <signal.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/sessions.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

using testing::AttachOrDie;
using testing::JoinAlone;
using testing::JoinPair;
using testing::Pair;
using ::testing::StartsWith;

class DaemonDeathTest : public ::testing::TestWithParam<int> {
 protected:
  // Ends `daemon` with the signal under test and waits for its exit.
  void End(testing::Daemon& daemon) {
    daemon.process().Signal(GetParam());
    daemon.process().Wait(absl::Seconds(20));
  }
  // How `call` of a session whose daemon went away begins.
  static std::string Gone(const std::string& call, const testing::Daemon& daemon) {
    return absl::StrCat(call, ": cclod ended the session (attach socket ", daemon.runtime_dir(),
                        "/attach.sock closed)");
  }
};

INSTANTIATE_TEST_SUITE_P(Signals, DaemonDeathTest, ::testing::Values(SIGKILL, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(sigabbrev_np(info.param));
                         });

// A killed daemon closes the join's connection to client.sock and the attach socket one after
// the other, in either order: each round may find either first.
TEST_P(DaemonDeathTest, JoinWaitingForTheOtherRank) {
  for (int round = 0; round < 10; ++round) {
    testing::Daemon daemon;
    std::unique_ptr<Client> client = AttachOrDie(daemon.runtime_dir());
    absl::StatusOr<std::string> token = client->CreateCommunicatorId();
    ASSERT_TRUE(token.ok()) << token.status();
    absl::Status joined;
    std::thread rank0([&] { joined = client->Join(*token, 0, 2).status(); });
    EXPECT_TRUE(daemon.process().WaitForOutput("rank 0 of 2 from", absl::Seconds(30)));
    End(daemon);
    rank0.join();
    EXPECT_EQ(joined.code(), absl::StatusCode::kUnavailable) << joined;
    const std::string message(joined.message());
    // A stopping daemon may refuse the join before it ends the session.
    const std::string refused =
        absl::StrCat("JoinCommunicator: join at root daemon ", daemon.peer_address(), " failed: ");
    if (GetParam() == SIGTERM && (message == "JoinCommunicator: this daemon is shutting down" ||
                                  message == refused + "root daemon is shutting down")) {
      continue;
    }
    EXPECT_THAT(message, StartsWith(Gone("JoinCommunicator", daemon) + "; attach again ("))
        << "round " << round;
  }
}

TEST_P(DaemonDeathTest, OpsInFlightAndCallsAfter) {
  testing::Daemon daemon;
  Pair pair = JoinPair(daemon.runtime_dir());
  absl::StatusOr<Buffer> small = pair.clients[0]->AllocBuffer(64);
  absl::StatusOr<Buffer> large = pair.clients[0]->AllocBuffer(16 << 20);
  ASSERT_TRUE(small.ok() && large.ok());
  std::memset(small->data(), 1, small->size());
  std::memset(large->data(), 2, large->size());
  // Rank 1 never calls them: both wait for it.
  absl::StatusOr<Request> small_op =
      pair.comms[0]->AllreduceAsync(*small, *small, 16, DataType::kInt32, ReduceOp::kSum);
  absl::StatusOr<Request> large_op = pair.comms[0]->AllreduceAsync(
      *large, *large, large->size() / 4, DataType::kInt32, ReduceOp::kSum);
  ASSERT_TRUE(small_op.ok() && large_op.ok()) << small_op.status() << large_op.status();
  absl::Status waited;
  std::thread waiter([&] { waited = large_op->Wait(); });
  End(daemon);
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable) << waited;
  EXPECT_EQ(waited.message(), Gone("Wait", daemon));

  // The buffers stay mapped and readable, and writable.
  EXPECT_EQ(static_cast<const char*>(small->data())[small->size() - 1], 1);
  EXPECT_EQ(static_cast<const char*>(large->data())[large->size() - 1], 2);
  std::memset(large->data(), 3, large->size());

  absl::Status status = small_op->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(status.message(), Gone("Wait", daemon));
  const std::vector<std::pair<std::string, absl::Status>> calls = {
      {"AllocBuffer", pair.clients[0]->AllocBuffer(16).status()},
      {"FreeBuffer", pair.clients[0]->FreeBuffer(*std::move(small))},
      {"CreateCommunicatorId", pair.clients[0]->CreateCommunicatorId().status()},
      {"JoinCommunicator", pair.clients[1]->Join("token", 0, 1).status()},
      {"Submit: waiting for cclod to take the op", pair.comms[1]->Nop()},
      {"Cancel", small_op->Cancel()},
      {"DestroyCommunicator", pair.comms[0]->Destroy()},
  };
  for (const auto& [call, result] : calls) {
    EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable) << result;
    EXPECT_THAT(std::string(result.message()), StartsWith(Gone(call, daemon))) << result;
  }
  EXPECT_EQ(static_cast<const char*>(small->data())[0], 1);  // a buffer not freed stays mapped

  // The daemon back, this process attaches again and runs ops beside the old Clients.
  daemon.Restart();
  std::unique_ptr<Client> client = AttachOrDie(daemon.runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(64);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::memset(buffer->data(), 4, buffer->size());
  EXPECT_TRUE(comm->Allreduce(*buffer, *buffer, 16, DataType::kInt32, ReduceOp::kSum).ok());
  EXPECT_EQ(static_cast<const char*>(buffer->data())[0], 4);
  status = pair.clients[0]->AllocBuffer(16).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith(Gone("AllocBuffer", daemon))) << status;
}

}  // namespace
}  // namespace cclo
