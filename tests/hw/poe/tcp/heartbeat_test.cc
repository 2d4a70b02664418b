// TcpSession's heartbeats: an up session sends HEARTBEAT while it has nothing else to send;
// a peer that sends only heartbeats keeps the session up; and one from which nothing comes
// for the peer timeout is lost: UNAVAILABLE to the handler, BYE with the reason to the peer.
// Both ends announce a timeout and the shorter applies; one under a second is refused.
// Time has to pass here, so these tests wait (one to five seconds), as a peer would. And
// sessions with the same period tick together.
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "hw/clock.h"
#include "hw/poe/tcp/engine.h"
#include "tests/hw/emu/fake_peer.h"

namespace cclo::hw::poe::tcp {
namespace {

using emu::testing::FakePeer;
using emu::testing::Pattern;
using emu::testing::TestComm;

/// Admits every session, counts the sessions closed, and reports the first one's end and
/// the first payload.
class ReportingHandler : public EngineHandler {
 public:
  explicit ReportingHandler(const TestComm& comm) : comm_(comm) {}

  absl::StatusOr<CommSecret> Secret(const CommId&) override { return comm_.config.secret; }
  void OnAuthenticated(Session& session) override { session.Admit(); }
  void OnSessionUp(Session&) override {}
  void OnSessionClosed(Session&, const absl::Status& reason) override {
    if (closed_.fetch_add(1) == 0) closed_first_.set_value(reason);
  }
  absl::StatusOr<std::byte*> OnSegment(Session&, const SegmentHeader& header) override {
    landing_.resize(header.length);
    return landing_.data();
  }
  absl::Status OnPayload(Session&, const SegmentHeader&) override {
    if (payloads_++ == 0) payload_.set_value(landing_);
    return absl::OkStatus();
  }
  hw::SteadyTime OnTimer(hw::SteadyTime) override { return hw::SteadyTime::InfiniteFuture(); }

  std::future<absl::Status> Closed() { return closed_first_.get_future(); }
  std::future<std::vector<std::byte>> Payload() { return payload_.get_future(); }
  int closed() const { return closed_.load(); }

 private:
  const TestComm& comm_;
  std::vector<std::byte> landing_;
  int payloads_ = 0;  ///< engine thread only
  std::atomic<int> closed_{0};
  std::promise<absl::Status> closed_first_;
  std::promise<std::vector<std::byte>> payload_;
};

/// An engine with peer timeout `timeout` whose session with a fake peer announcing
/// `announced_ms` is up once Start() has returned without a fatal failure.
struct UpSession {
  UpSession() : handler(comm) {
    comm.config.id = CommId{7};
    comm.config.secret = CommSecret{8};
  }
  ~UpSession() {
    if (engine != nullptr) engine->Stop();
  }

  void Start(absl::Duration timeout, uint64_t announced_ms = kMaxPeerTimeoutMs) {
    absl::StatusOr<EnginePtr> started = CreateTcpEngine({.peer_timeout = timeout}, &handler);
    ASSERT_TRUE(started.ok()) << started.status();
    engine = *std::move(started);
    ASSERT_TRUE(engine->Start().ok());
    peer.emplace(engine->address(), comm);
    peer->Authenticate(comm.config.secret, announced_ms);
    absl::StatusOr<ControlMessage> accept = peer->ReadControl();
    ASSERT_TRUE(accept.ok()) << accept.status();
    ASSERT_EQ(accept->kind, ControlKind::kAccept);
  }

  /// Expects the engine to say BYE with `reason` (after a heartbeat at every tick) and to
  /// report the session closed with it.
  void ExpectLost(std::future<absl::Status>& closed, const std::string& reason) {
    // The read is bounded by the fake's timeout.
    absl::StatusOr<ControlMessage> bye = peer->ReadControl();
    ASSERT_TRUE(bye.ok()) << bye.status();
    EXPECT_EQ(bye->kind, ControlKind::kBye);
    EXPECT_EQ(bye->reason, reason);
    // One at every tick before the sixth, which found the peer lost (the first heard the
    // handshake).
    EXPECT_EQ(peer->heartbeats(), 5u);
    ASSERT_EQ(closed.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    const absl::Status status = closed.get();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(status.message(), reason);
  }

  TestComm comm;
  ReportingHandler handler;
  EnginePtr engine;
  std::optional<FakePeer> peer;
};

// A fifth of the timeout per tick, at most 10 s; as many ticks as cover the timeout.
TEST(HeartbeatTest, TicksCoverTheTimeoutAndComeAtLeastEveryTenSeconds) {
  auto plan = [](absl::Duration timeout) {
    const TcpSession::HeartbeatPlan made = TcpSession::PlanHeartbeats(timeout);
    return std::make_pair(made.period, made.ticks);
  };
  EXPECT_EQ(plan(absl::Seconds(1)), std::make_pair(absl::Milliseconds(200), int64_t{5}));
  EXPECT_EQ(plan(absl::Seconds(10)), std::make_pair(absl::Seconds(2), int64_t{5}));
  EXPECT_EQ(plan(absl::Seconds(50)), std::make_pair(absl::Seconds(10), int64_t{5}));
  EXPECT_EQ(plan(absl::Seconds(65)), std::make_pair(absl::Seconds(10), int64_t{7}));
  EXPECT_EQ(plan(absl::Hours(24)), std::make_pair(absl::Seconds(10), int64_t{8640}));
}

TEST(HeartbeatTest, APeerThatSendsNothingIsLost) {
  UpSession up;
  std::future<absl::Status> closed = up.handler.Closed();
  ASSERT_NO_FATAL_FAILURE(up.Start(absl::Seconds(1)));
  up.ExpectLost(closed,
                "heartbeat missed: nothing came from peer daemon 127.0.0.1:1 within the "
                "session's peer timeout of 1s");
}

// The less patient end sets the session's timeout, and its heartbeats come often enough.
TEST(HeartbeatTest, TheShorterOfTheTwoTimeoutsApplies) {
  UpSession up;
  std::future<absl::Status> closed = up.handler.Closed();
  ASSERT_NO_FATAL_FAILURE(up.Start(absl::Hours(1), 1000));
  up.ExpectLost(closed,
                "heartbeat missed: nothing came from peer daemon 127.0.0.1:1 within the "
                "session's peer timeout of 1s");
}

// A timeout under a second would have the shared engine tick this session's heartbeats
// more often than every 200 ms: refused as the config refuses it.
TEST(HeartbeatTest, APeerTimeoutUnderASecondIsRefused) {
  TestComm comm;
  comm.config.id = CommId{7};
  comm.config.secret = CommSecret{8};
  ReportingHandler handler(comm);
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine({}, &handler);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->Start().ok());
  FakePeer peer((*engine)->address(), comm);
  peer.SendControl({.kind = ControlKind::kHello,
                    .segment_bytes = 64 << 10,
                    .timeout_ms = 999,
                    .connector = emu::testing::kFakeAddress,
                    .acceptor = (*engine)->address()});
  absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_EQ(refusal->reason, "peer timeout 999 ms is not in [1000, 86400000]");
  EXPECT_EQ((*engine)->wire_errors(), 1u);
  (*engine)->Stop();
}

TEST(HeartbeatTest, APeerThatSendsOnlyHeartbeatsStaysUp) {
  UpSession up;
  std::future<absl::Status> closed = up.handler.Closed();
  ASSERT_NO_FATAL_FAILURE(up.Start(absl::Seconds(2)));

  // Two peer timeouts of nothing but a heartbeat every 200 ms.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < until) {
    up.peer->SendControl({.kind = ControlKind::kHeartbeat});
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(closed.wait_for(std::chrono::seconds(0)), std::future_status::timeout) << closed.get();

  // The session still carries data.
  std::future<std::vector<std::byte>> payload = up.handler.Payload();
  up.peer->SendSegment(up.peer->Message(SegmentType::kRendezvousData, 4096), Pattern(4096, 3));
  ASSERT_EQ(payload.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(payload.get(), Pattern(4096, 3));
}

/// Counts the engine's sleeps: it tells its pollers before each one.
class SleepCounter : public Poller {
 public:
  SleepCounter() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~SleepCounter() override { close(fd_); }
  int wake_fd() const override { return fd_; }
  bool Poll() override { return false; }
  hw::SteadyTime Sleeping() override {
    sleeps_.fetch_add(1);
    return hw::SteadyTime::InfiniteFuture();
  }
  void Awake() override {}

  int sleeps() const { return sleeps_.load(); }

 private:
  const int fd_;
  std::atomic<int> sleeps_{0};
};

// Sessions with the same period tick at the same instants: an idle engine with many
// sessions wakes once per period, not once per session.
TEST(HeartbeatTest, SessionsOfOnePeriodTickTogether) {
  constexpr int kSessions = 16;
  TestComm comm;
  comm.config.id = CommId{7};
  comm.config.secret = CommSecret{8};
  ReportingHandler handler(comm);
  SleepCounter counter;
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine({.peer_timeout = absl::Seconds(10)}, &handler);
  ASSERT_TRUE(engine.ok()) << engine.status();
  (*engine)->AddPoller(&counter);
  ASSERT_TRUE((*engine)->Start().ok());
  std::vector<std::unique_ptr<FakePeer>> peers;
  for (int i = 0; i < kSessions; ++i) {
    peers.push_back(std::make_unique<FakePeer>((*engine)->address(), comm));
    peers.back()->Authenticate(comm.config.secret);
    absl::StatusOr<ControlMessage> accept = peers.back()->ReadControl();
    ASSERT_TRUE(accept.ok()) << accept.status();
    ASSERT_EQ(accept->kind, ControlKind::kAccept);
    // Up at different times within one period.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  // Ticks every 2 s: two or three of them in 5 s, and a sleep after each.
  const int before = counter.sleeps();
  std::this_thread::sleep_for(std::chrono::seconds(5));
  const int sleeps = counter.sleeps() - before;
  EXPECT_LE(sleeps, 6) << "one wake-up per session's tick would be about " << 2 * kSessions;
  EXPECT_GE(sleeps, 2);
  EXPECT_EQ(handler.closed(), 0);
  (*engine)->Stop();
}

}  // namespace
}  // namespace cclo::hw::poe::tcp
