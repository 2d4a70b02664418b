// Failure semantics across real daemons: a client killed mid-communicator, a peer daemon
// stopped mid-op, and an op that can never complete. The survivors get a clear error,
// fast, and keep serving.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

/// Joins `a` as rank 0 and `b` as rank 1 of a new communicator rooted at `a`'s daemon.
std::pair<uint64_t, uint64_t> JoinPair(RawSession& a, RawSession& b) {
  const std::string token = a.NewToken();
  uint64_t handle_b = 0;
  std::thread join_b([&] { EXPECT_TRUE(b.Join(token, 1, 2, &handle_b).ok()); });
  uint64_t handle_a = 0;
  grpc::Status joined = a.Join(token, 0, 2, &handle_a);
  join_b.join();
  EXPECT_TRUE(joined.ok()) << joined.error_message();
  return {handle_a, handle_b};
}

cclo::v1::SubmitRequest RecvRequest(uint64_t handle, uint64_t buffer, uint32_t from) {
  cclo::v1::SubmitRequest request;
  request.set_comm_handle(handle);
  request.set_collective(cclo::v1::RECV);
  request.set_datatype(cclo::v1::FLOAT32);
  request.set_count(256);
  request.set_peer(from);
  request.set_tag(7);
  request.mutable_recv()->set_buffer_id(buffer);
  request.mutable_recv()->set_length(1024);
  return request;
}

TEST(FailureTest, KilledClientBreaksTheCommunicatorForItsPeers) {
  Daemon a, b;
  RawSession rank0(a.runtime_dir());
  const std::string token = rank0.NewToken();
  // Rank 1 is a real client process that joins and then blocks in an allreduce.
  Process rank1({Runfile("client/cclo-run"), "run", "--runtime-dir", b.runtime_dir(),
                 "--token", token, "--rank", "1", "--size", "2", "--ops", "allreduce",
                 "--sizes", "1M"});
  uint64_t handle = 0;
  grpc::Status joined = rank0.Join(token, 0, 2, &handle);
  ASSERT_TRUE(joined.ok()) << joined.error_message();
  rank1.Signal(SIGKILL);
  EXPECT_EQ(rank1.Wait(absl::Seconds(10)).exit_code, -1);

  grpc::Status status = rank0.Run(AllreduceRequest(handle, rank0.Alloc(1 << 20), 1 << 18));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_NE(status.error_message().find("rank 1"), std::string::npos) << status.error_message();

  // Both daemons keep serving new communicators.
  RawSession again0(a.runtime_dir()), again1(b.runtime_dir());
  auto [h0, h1] = JoinPair(again0, again1);
  uint64_t buffer0 = again0.Alloc(4096), buffer1 = again1.Alloc(4096);
  grpc::Status other;
  std::thread peer([&] { other = again1.Run(AllreduceRequest(h1, buffer1, 1024)); });
  grpc::Status mine = again0.Run(AllreduceRequest(h0, buffer0, 1024));
  peer.join();
  EXPECT_TRUE(mine.ok()) << mine.error_message();
  EXPECT_TRUE(other.ok()) << other.error_message();
}

TEST(FailureTest, StoppedPeerDaemonFailsPendingOpsAndExitsCleanly) {
  Daemon a;
  auto b = std::make_unique<Daemon>();
  const std::string b_dir = b->runtime_dir();
  RawSession rank0(a.runtime_dir());
  RawSession rank1(b_dir);
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  const uint64_t buffer = rank0.Alloc(4096);

  grpc::Status pending;
  std::thread receiver([&] { pending = rank0.Run(RecvRequest(handle0, buffer, 1)); });
  b->process().Signal(SIGTERM);
  ProcessResult stopped = b->process().Wait(absl::Seconds(20));
  receiver.join();

  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_NE(stopped.output.find("cclod stopped"), std::string::npos) << stopped.output;
  struct stat ignored;
  for (const char* socket : {"/attach.sock", "/client.sock", "/admin.sock"}) {
    EXPECT_NE(stat((b_dir + socket).c_str(), &ignored), 0) << socket << " left behind";
  }
  EXPECT_EQ(pending.error_code(), grpc::StatusCode::UNAVAILABLE) << pending.error_message();
  EXPECT_FALSE(pending.error_message().empty());
  // Later ops on the broken communicator fail at once with the reason.
  grpc::Status later = rank0.Run(RecvRequest(handle0, buffer, 1));
  EXPECT_EQ(later.error_code(), grpc::StatusCode::UNAVAILABLE) << later.error_message();
  EXPECT_NE(later.error_message().find("broken"), std::string::npos) << later.error_message();
}

TEST(FailureTest, OpThatCannotCompleteEndsAtItsDeadline) {
  Daemon a, b;
  RawSession rank0(a.runtime_dir());
  RawSession rank1(b.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  cclo::v1::SubmitRequest request = RecvRequest(handle0, rank0.Alloc(4096), 1);
  request.set_timeout_ms(300);  // rank 1 never sends
  grpc::Status status = rank0.Run(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  grpc::Status later = rank0.Run(RecvRequest(handle0, rank0.Alloc(4096), 1));
  EXPECT_EQ(later.error_code(), grpc::StatusCode::UNAVAILABLE) << later.error_message();
  EXPECT_NE(later.error_message().find("broken"), std::string::npos) << later.error_message();
}

TEST(FailureTest, StoppingDaemonEndsAPendingJoinAtOnce) {
  auto daemon = std::make_unique<Daemon>();
  RawSession rank0(daemon->runtime_dir());
  grpc::Status joined;
  std::thread join([&] { joined = rank0.Join(rank0.NewToken(), 0, 2); });  // rank 1 never comes
  ASSERT_TRUE(daemon->process().WaitForOutput("joining at this root", absl::Seconds(20)));
  daemon->process().Signal(SIGTERM);
  ProcessResult stopped = daemon->process().Wait(absl::Seconds(30));
  join.join();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_NE(joined.error_message().find("shutting down"), std::string::npos)
      << joined.error_message();
}

TEST(FailureTest, OutOfDescriptorsPausesAcceptingAndRecovers) {
  Daemon a("", {"/usr/bin/prlimit", "--nofile=80"});
  Daemon b;
  // Hold more connections to a's data port than a has descriptors left.
  std::vector<int> flood;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(a.data_port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < 120; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      close(fd);
      break;
    }
    flood.push_back(fd);
  }
  EXPECT_TRUE(a.process().WaitForOutput("not accepting data sessions", absl::Seconds(20)))
      << a.process().Output().substr(0, 4000);
  for (int fd : flood) close(fd);

  // Once the flood is gone, a works with other daemons again.
  RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir());
  auto [h0, h1] = JoinPair(rank0, rank1);
  uint64_t buffer0 = rank0.Alloc(4096), buffer1 = rank1.Alloc(4096);
  grpc::Status other;
  std::thread peer([&] { other = rank1.Run(AllreduceRequest(h1, buffer1, 1024)); });
  grpc::Status mine = rank0.Run(AllreduceRequest(h0, buffer0, 1024));
  peer.join();
  EXPECT_TRUE(mine.ok()) << mine.error_message();
  EXPECT_TRUE(other.ok()) << other.error_message();
}

}  // namespace
}  // namespace cclo::testing
