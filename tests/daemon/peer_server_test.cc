// PeerServer's restarts, driven by gRPC's log line of a stopped listener: each failed accept
// and failed start a pause, the next server taking over, a second stop served while the first
// stopped server still ends its calls, and a stop that ends the tries.
#include "daemon/peer_server.h"

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "daemon/grpc_log.h"

namespace cclo::daemon {
namespace {

/// A Peer service whose joins wait until released.
class HeldJoins : public cclo::v1::Peer::Service {
 public:
  grpc::Status Join(grpc::ServerContext* context, const cclo::v1::PeerJoinRequest*,
                    cclo::v1::PeerJoinResponse*) override {
    taken.Notify();
    // Until released, or cancelled (the client's deadline, its server's shutdown deadline).
    while (!released.WaitForNotificationWithTimeout(absl::Milliseconds(50))) {
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
    }
    return grpc::Status::OK;
  }
  absl::Notification taken;
  absl::Notification released;
};

class PeerServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ForwardGrpcLogs(); }
  void TearDown() override { StopForwardingGrpcLogs(); }

  /// Builds a server of service_ without a port, or fails while failures_ are left.
  PeerServer::Build Builder() {
    return [this]() -> absl::StatusOr<std::unique_ptr<grpc::Server>> {
      absl::MutexLock lock(&mu_);
      ++builds_;
      if (failures_ > 0) {
        --failures_;
        return absl::UnavailableError("cannot listen");
      }
      grpc::ServerBuilder builder;
      builder.RegisterService(&service_);
      std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
      last_built_ = server.get();
      return server;
    };
  }

  /// The server built last, whose only way in is its in-process channel.
  grpc::Server* LastBuilt() {
    absl::MutexLock lock(&mu_);
    return last_built_;
  }

  absl::StatusOr<std::unique_ptr<PeerServer>> Start(absl::Duration longest_call) {
    return PeerServer::Start("127.0.0.1:1", Builder(), longest_call, [this] { ++pauses_; });
  }

  int Builds() {
    absl::MutexLock lock(&mu_);
    return builds_;
  }

  void Fail(int times) {
    absl::MutexLock lock(&mu_);
    failures_ = times;
  }

  /// Whether `condition` holds within 20 s.
  static bool Within20s(const std::function<bool()>& condition) {
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (!condition()) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  static void ListenerStops() { gpr_log(GPR_ERROR, "Failed accept4: %s", "Too many open files"); }

  HeldJoins service_;
  absl::Mutex mu_;
  int builds_ = 0;
  int failures_ = 0;
  grpc::Server* last_built_ = nullptr;
  std::atomic<int> pauses_{0};
};

TEST_F(PeerServerTest, AStoppedListenerIsServedAgainOnceAStartSucceeds) {
  absl::StatusOr<std::unique_ptr<PeerServer>> server = Start(absl::Seconds(1));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Builds(), 1);
  EXPECT_EQ(pauses_, 0);
  Fail(2);
  ListenerStops();
  ASSERT_TRUE(Within20s([&] { return Builds() == 4; }));
  EXPECT_EQ(pauses_, 3);  // the accept, then each failed start
  (*server)->Shutdown(hw::SteadyNow());
  EXPECT_EQ(Builds(), 4);
  EXPECT_EQ(pauses_, 3);
}

TEST_F(PeerServerTest, ASecondStopIsServedWhileTheFirstStoppedServerEndsItsCalls) {
  absl::StatusOr<std::unique_ptr<PeerServer>> server = Start(absl::Minutes(10));
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<cclo::v1::Peer::Stub> stub =
      cclo::v1::Peer::NewStub(LastBuilt()->InProcessChannel(grpc::ChannelArguments()));
  std::jthread join([&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    cclo::v1::PeerJoinResponse response;
    (void)stub->Join(&context, cclo::v1::PeerJoinRequest(), &response);
  });
  ASSERT_TRUE(service_.taken.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ListenerStops();
  EXPECT_TRUE(Within20s([&] { return Builds() == 2; }));
  // The first server's shutdown waits for the held join (up to longest_call, 10 minutes):
  // the next stop does not wait for it.
  ListenerStops();
  EXPECT_TRUE(Within20s([&] { return Builds() == 3; }));
  // (An in-process channel's calls end with their server's shutdown, unlike a TCP one's:
  // the e2e test sees a join on the stopped server go on.)
  service_.released.Notify();
  join.join();
  stub.reset();
  (*server)->Shutdown(hw::SteadyNow());
  EXPECT_EQ(pauses_, 2);
}

TEST_F(PeerServerTest, AStopWhileTheFirstServerIsBuiltIsServed) {
  bool first = true;
  PeerServer::Build build = Builder();
  absl::StatusOr<std::unique_ptr<PeerServer>> server = PeerServer::Start(
      "127.0.0.1:1",
      [&]() -> absl::StatusOr<std::unique_ptr<grpc::Server>> {
        if (std::exchange(first, false)) ListenerStops();
        return build();
      },
      absl::Seconds(1), [this] { ++pauses_; });
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(Within20s([&] { return Builds() == 2; }));
  (*server)->Shutdown(hw::SteadyNow());
  EXPECT_EQ(pauses_, 1);
}

// (ListenerStops() after the server is gone would use it, freed, were the hook left: the
// sanitizer configs see that.)
TEST_F(PeerServerTest, AStopEndsTheTriesAndTheServerHearsNoMoreOfGrpcsLog) {
  absl::StatusOr<std::unique_ptr<PeerServer>> server = Start(absl::Seconds(1));
  ASSERT_TRUE(server.ok()) << server.status();
  Fail(1'000'000);
  ListenerStops();
  ASSERT_TRUE(Within20s([&] { return pauses_ >= 3; }));
  (*server)->Shutdown(hw::SteadyNow());
  const int builds = Builds();
  const int pauses = pauses_;
  server->reset();
  ListenerStops();  // with no PeerServer to call
  EXPECT_EQ(Builds(), builds);
  EXPECT_EQ(pauses_, pauses);
}

}  // namespace
}  // namespace cclo::daemon
