#include "daemon/peer_client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "daemon/root_gather.h"
#include "hw/clock.h"
#include "tests/loopback/loopback.h"

namespace cclo::daemon {
namespace {

// A root daemon's Peer service that answers every join with `answer()` (OK at once unless
// given), and remembers where each came from.
class AnsweringRoot final : public cclo::v1::Peer::Service {
 public:
  /// Serves on 127.0.0.1:`port` (0: a free one, then port() says which; -1: none, the
  /// connections Serve gives it only).
  explicit AnsweringRoot(
      int port = 0, std::function<grpc::Status()> answer = [] { return grpc::Status::OK; })
      : answer_(std::move(answer)) {
    grpc::ServerBuilder builder;
    if (port >= 0) {
      builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                               &port_);
    }
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~AnsweringRoot() override { server_->Shutdown(hw::ToWallDeadline(hw::SteadyNow())); }
  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  /// Serves the connection `fd`, which it takes.
  void Serve(int fd) { grpc::AddInsecureChannelFromFd(server_.get(), fd); }

  grpc::Status Join(grpc::ServerContext* context, const cclo::v1::PeerJoinRequest* request,
                    cclo::v1::PeerJoinResponse*) override {
    {
      absl::MutexLock lock(&mu_);
      peers_.emplace_back(request->comm_id(), context->peer());
      timeouts_.push_back(request->timeout_ms());
    }
    return answer_();
  }

  /// The communicator id and the client's address ("ipv4:127.0.0.1:port") of each join
  /// received, in order.
  std::vector<std::pair<std::string, std::string>> peers() const {
    absl::MutexLock lock(&mu_);
    return peers_;
  }
  /// The timeout_ms of each join received, in order.
  std::vector<uint32_t> timeouts() const {
    absl::MutexLock lock(&mu_);
    return timeouts_;
  }

 private:
  const std::function<grpc::Status()> answer_;
  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, std::string>> peers_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> timeouts_ ABSL_GUARDED_BY(mu_);
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

/// Whether `done()` holds within 20 s (checked every millisecond).
bool Within20s(const std::function<bool()>& done) {
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Seconds(20);
  while (!done() && hw::SteadyNow() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return done();
}

/// A join of communicator `comm_id` (no other field) at `root` as a call of its own.
absl::StatusOr<cclo::v1::PeerJoinResponse> JoinAt(PeerClient& client, const std::string& root,
                                                  absl::Duration timeout,
                                                  const std::string& comm_id = "") {
  cclo::v1::PeerJoinRequest request;
  request.set_comm_id(comm_id);
  PeerClient::Call call;
  return client.Join(root, request, hw::SteadyNow() + timeout, call);
}

// A root daemon's peer port that resets the first `resets` connections once the client's
// first bytes wait unread (as a listener that paused for want of descriptors does to the
// connections queued on it when it closes), and has `root` serve the later ones.
class ResettingPort {
 public:
  ResettingPort(AnsweringRoot* root, int resets) {
    listener_ = cclo::testing::ListenLoopback(&address_);
    thread_ = std::jthread([this, root, resets](std::stop_token stop) {
      while (!stop.stop_requested()) {
        pollfd readable{.fd = listener_, .events = POLLIN, .revents = 0};
        if (poll(&readable, 1, 20) != 1) continue;
        // gRPC takes it non-blocking; by the system call, as daemon/unix_listener.cc says.
        const int fd = static_cast<int>(
            syscall(SYS_accept4, listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (fd < 0) continue;
        if (taken_.load() >= resets) {
          taken_.fetch_add(1);
          root->Serve(fd);
          continue;
        }
        pollfd sent{.fd = fd, .events = POLLIN, .revents = 0};
        poll(&sent, 1, 5000);
        {
          absl::MutexLock lock(&mu_);
          last_reset_ = hw::SteadyNow();
        }
        taken_.fetch_add(1);  // before the client can learn of the reset
        const linger reset{.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
        close(fd);
      }
    });
  }
  ~ResettingPort() {
    thread_.request_stop();
    thread_.join();
    close(listener_);
  }
  bool listening() const { return listener_ >= 0; }
  const std::string& address() const { return address_; }
  /// The connections taken so far.
  int taken() const { return taken_.load(); }
  /// When the last connection reset was.
  hw::SteadyTime last_reset() const {
    absl::MutexLock lock(&mu_);
    return last_reset_;
  }

 private:
  std::string address_;
  int listener_ = -1;
  std::atomic<int> taken_ = 0;
  mutable absl::Mutex mu_;
  hw::SteadyTime last_reset_ ABSL_GUARDED_BY(mu_);
  std::jthread thread_;
};

// A root daemon restarted on its address: a join after the root came back dials it anew
// instead of failing at once with the old error.
TEST(PeerClientTest, AJoinAfterTheRootCameBackReachesIt) {
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  auto root = std::make_unique<AnsweringRoot>();
  const int port = root->port();
  const std::string address = root->address();
  root.reset();  // the root dies: joins at it are refused, at once
  absl::Status refused = JoinAt(client, address, absl::Seconds(30)).status();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_TRUE(absl::EndsWith(refused.message(), "Connection refused")) << refused;
  EXPECT_EQ(client.channels(), 0u);
  root = std::make_unique<AnsweringRoot>(port);  // back on the same address
  ASSERT_EQ(root->port(), port);
  absl::Status joined = JoinAt(client, address, absl::Seconds(30)).status();
  EXPECT_TRUE(joined.ok()) << joined;
  EXPECT_EQ(client.channels(), 0u);
}

// A root whose peer port reset the join's connection before it was made: the join tries
// again, on a new connection each time, counted, and reaches the root, giving it 9/10 of
// the time then left (not of the time the join began with).
TEST(PeerClientTest, AJoinWhoseConnectionTheRootResetTriesAgain) {
  AnsweringRoot root(-1);
  ResettingPort port(&root, 2);
  ASSERT_TRUE(port.listening());
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Seconds(60);
  PeerClient::Call call;
  absl::Status joined =
      client.Join(port.address(), cclo::v1::PeerJoinRequest(), deadline, call).status();
  EXPECT_TRUE(joined.ok()) << joined;
  EXPECT_EQ(port.taken(), 3);
  EXPECT_EQ(client.retries(), 2u);
  ASSERT_EQ(root.timeouts().size(), 1u);
  EXPECT_LE(root.timeouts()[0], JoinTimeoutMs(deadline - port.last_reset()));
  EXPECT_EQ(client.channels(), 0u);
}

// A root that resets every connection: the join fails once its deadline leaves no room for
// another try, saying how often it tried, and gRPC's words for the reset.
TEST(PeerClientTest, AJoinWhoseConnectionsAreAllResetFailsByItsDeadline) {
  AnsweringRoot root(-1);
  ResettingPort port(&root, INT_MAX);
  ASSERT_TRUE(port.listening());
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  absl::Status joined = JoinAt(client, port.address(), absl::Seconds(3)).status();
  EXPECT_TRUE(absl::IsUnavailable(joined)) << joined;
  EXPECT_TRUE(absl::StartsWith(joined.message(), absl::StrCat("tried ", port.taken(), " times")))
      << joined << "; " << port.taken() << " connections";
  EXPECT_TRUE(absl::StrContains(
      joined.message(), " times within the join timeout of 3s: failed to connect to all addresses"))
      << joined;
  EXPECT_TRUE(absl::EndsWith(joined.message(), "Connection reset by peer")) << joined;
  EXPECT_GE(port.taken(), 2);
  EXPECT_EQ(client.retries(), static_cast<uint64_t>(port.taken() - 1));
  EXPECT_TRUE(root.peers().empty());
  EXPECT_EQ(client.channels(), 0u);
}

// The same with TLS, whose handshake the reset ends: the join tries again as well.
TEST(PeerClientTest, AJoinOverTlsWhoseConnectionsAreAllResetTriesAgain) {
  AnsweringRoot root(-1);
  ResettingPort port(&root, INT_MAX);
  ASSERT_TRUE(port.listening());
  PeerClient client(grpc::SslCredentials(grpc::SslCredentialsOptions()));
  ASSERT_TRUE(client.Start().ok());
  absl::Status joined = JoinAt(client, port.address(), absl::Seconds(3)).status();
  EXPECT_TRUE(absl::IsUnavailable(joined)) << joined;
  EXPECT_TRUE(absl::EndsWith(joined.message(), "Connection reset by peer")) << joined;
  EXPECT_GE(port.taken(), 2);
  EXPECT_EQ(client.retries(), static_cast<uint64_t>(port.taken() - 1));
}

// A join cancelled while it waits to try again ends then, with CANCELLED.
TEST(PeerClientTest, ACancelWhileAJoinWaitsToTryAgainEndsIt) {
  AnsweringRoot root(-1);
  ResettingPort port(&root, INT_MAX);
  ASSERT_TRUE(port.listening());
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  PeerClient::Call call;
  absl::StatusOr<cclo::v1::PeerJoinResponse> joined;
  std::jthread joining([&] {
    joined = client.Join(port.address(), cclo::v1::PeerJoinRequest(),
                         hw::SteadyNow() + absl::Seconds(120), call);
  });
  // Counted just before the wait (if the machine is slow, the next try may have begun: the
  // cancel ends that as well).
  EXPECT_TRUE(Within20s([&] { return client.retries() >= 1; }));
  call.Cancel();
  joining.join();
  EXPECT_TRUE(absl::IsCancelled(joined.status())) << joined.status();
  // A channel still connecting is kept until it settles, which the reset makes quick.
  EXPECT_TRUE(Within20s([&] { return client.channels() == 0; })) << client.channels();
}

// A daemon's ranks of one communicator join together: they share one connection to the
// root (one TLS handshake, not one per rank), made for them; another communicator's join
// in progress there meanwhile has a connection of its own, which a partition may have
// left dropped by the root.
TEST(PeerClientTest, JoinsOfOneCommunicatorShareAConnectionMadeForThem) {
  absl::Notification answer;
  AnsweringRoot root(0, [&] {
    answer.WaitForNotification();
    return grpc::Status::OK;
  });
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  std::vector<std::thread> joins;
  std::vector<absl::Status> joined(5);
  for (size_t i = 0; i < joined.size(); ++i) {
    joins.emplace_back([&, i] {
      joined[i] = JoinAt(client, root.address(), absl::Seconds(30), i < 3 ? "x" : "y").status();
    });
  }
  EXPECT_TRUE(Within20s([&] { return root.peers().size() == joined.size(); }));
  EXPECT_EQ(client.channels(), 2u);
  std::map<std::string, std::set<std::string>> connections;  // of each communicator
  std::set<std::string> all;
  for (const auto& [comm_id, peer] : root.peers()) {
    connections[comm_id].insert(peer);
    all.insert(peer);
  }
  EXPECT_EQ(connections["x"].size(), 1u);
  EXPECT_EQ(connections["y"].size(), 1u);
  EXPECT_EQ(all.size(), 2u);
  answer.Notify();
  for (std::thread& join : joins) join.join();
  for (const absl::Status& status : joined) EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(client.channels(), 0u);
}

// A daemon that stops while one of its ranks waits at a root that does not answer ends
// that join at once, and refuses joins after it.
TEST(PeerClientTest, StopEndsAJoinInProgressAndRefusesLaterOnes) {
  // A listener that never accepts: a root daemon that hangs.
  std::string root;
  const int listener = cclo::testing::ListenLoopback(&root);
  ASSERT_GE(listener, 0);
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  absl::StatusOr<cclo::v1::PeerJoinResponse> joined;
  std::thread joining([&] { joined = JoinAt(client, root, absl::Seconds(120)); });
  absl::SleepFor(absl::Milliseconds(300));  // the join is on its way or waiting; both end
  client.Stop();
  joining.join();
  EXPECT_EQ(joined.status(), absl::UnavailableError("this daemon is shutting down"));
  EXPECT_EQ(JoinAt(client, root, absl::Seconds(120)).status(),
            absl::UnavailableError("this daemon is shutting down"));
  close(listener);
}

// A daemon's stop waits for no channel kept for its connection to settle (one to a root
// that hangs stays connecting until gRPC's connect timeout of 20 s): Stop closes those, and
// those of the joins it ends.
TEST(PeerClientTest, StopClosesTheChannelsStillConnecting) {
  // A listener that never accepts: a root daemon that hangs.
  std::string root;
  const int listener = cclo::testing::ListenLoopback(&root);
  ASSERT_GE(listener, 0);
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  EXPECT_TRUE(absl::IsUnavailable(JoinAt(client, root, absl::Milliseconds(300)).status()));
  EXPECT_EQ(client.channels(), 1u);  // kept: still connecting
  absl::StatusOr<cclo::v1::PeerJoinResponse> joined;
  std::thread joining([&] { joined = JoinAt(client, root, absl::Seconds(120), "other"); });
  EXPECT_TRUE(Within20s([&] { return client.channels() == 2; }));
  client.Stop();
  joining.join();
  EXPECT_EQ(joined.status(), absl::UnavailableError("this daemon is shutting down"));
  EXPECT_EQ(client.channels(), 0u);
  close(listener);
}

// A root daemon that serves answers a join by 9/10 of its time, the missing ranks' names
// at the latest: one that does not answer by the deadline is unreachable or hangs, which
// the join says, as UNAVAILABLE as a root it cannot connect to, instead of gRPC's bare
// 'Deadline Exceeded', which reads as if ranks were missing.
TEST(PeerClientTest, AJoinThatTheRootDoesNotAnswerSaysSo) {
  // A listener that never accepts: a root daemon that hangs, or a partition after the
  // connection was made.
  std::string root;
  const int listener = cclo::testing::ListenLoopback(&root);
  ASSERT_GE(listener, 0);
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  EXPECT_EQ(JoinAt(client, root, absl::Milliseconds(300)).status(),
            absl::UnavailableError("no answer within the join timeout of 300ms: unreachable, or "
                                   "not serving (Deadline Exceeded)"));
  close(listener);
}

// A root daemon's answer at 9/10 of the join's time that a loaded machine delayed past the
// deadline (here the root answers just after it) is still the join's end: ranks missing
// there must not read as a root that never answered.
TEST(PeerClientTest, ARootsAnswerThatComesJustAfterTheDeadlineIsHeard) {
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Milliseconds(300);
  AnsweringRoot root(0, [deadline] {
    absl::SleepFor(hw::Left(deadline) + absl::Milliseconds(50));
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "missing ranks 1");
  });
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  PeerClient::Call call;
  EXPECT_EQ(client.Join(root.address(), cclo::v1::PeerJoinRequest(), deadline, call).status(),
            absl::DeadlineExceededError("missing ranks 1"));
}

// A join whose call was cancelled ends with CANCELLED, also when the cancel came before
// the join began (the operator destroyed the communicator meanwhile).
TEST(PeerClientTest, ACancelledCallEndsTheJoin) {
  std::string root;
  const int listener = cclo::testing::ListenLoopback(&root);
  ASSERT_GE(listener, 0);
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  PeerClient::Call call;
  call.Cancel();
  EXPECT_TRUE(absl::IsCancelled(
      client.Join(root, cclo::v1::PeerJoinRequest(), hw::SteadyNow() + absl::Seconds(120), call)
          .status()));
  close(listener);
}

// Every token names its root's address, and a root drops a connection whose pings a
// partition cut off: a channel lives only while joins use it, so none is kept idle.
TEST(PeerClientTest, NoChannelOutlivesItsJoins) {
  PeerClient client(grpc::InsecureChannelCredentials());
  ASSERT_TRUE(client.Start().ok());
  AnsweringRoot root;
  ASSERT_TRUE(JoinAt(client, root.address(), absl::Seconds(30)).ok());
  for (int i = 0; i < 10; ++i) {
    // Port 1 on loopback refuses at once (or the deadline passes): only the channels matter.
    (void)JoinAt(client, absl::StrCat("127.0.0.", i + 2, ":1"), absl::Milliseconds(50));
  }
  EXPECT_EQ(client.channels(), 0u);
}

}  // namespace
}  // namespace cclo::daemon
