// TcpEngine's pollers (hw/poller.h): polled on the engine thread, woken by their fd while
// the engine sleeps, or by the time Sleeping() asks for; a task a poller posts runs in the
// same turn, before the next poll, and the deadline it gives the handler counts before the
// engine next sleeps. A turn accepts a bounded batch of connections. And the bound on
// accepted connections in their handshake: one more closes the oldest, and the newest is
// served. A handshake that does not finish says its timeout, and whether the connect was
// answered.
#include "hw/poe/tcp/engine.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hw/clock.h"
#include "hw/poe/handshake.h"
#include "hw/poe/wire.h"
#include "tests/loopback/loopback.h"

namespace cclo::hw::poe::tcp {
namespace {

/// Admits nothing; the engine here only runs pollers.
class IdleHandler : public EngineHandler {
 public:
  absl::StatusOr<CommSecret> Secret(const CommId&) override {
    return absl::NotFoundError("no communicators");
  }
  void OnAuthenticated(Session&) override {}
  void OnSessionUp(Session&) override {}
  void OnSessionClosed(Session&, const absl::Status&) override {}
  absl::StatusOr<std::byte*> OnSegment(Session&, const SegmentHeader&) override {
    return absl::InternalError("no segments expected");
  }
  absl::Status OnPayload(Session&, const SegmentHeader&) override { return absl::OkStatus(); }
  hw::SteadyTime OnTimer(hw::SteadyTime) override { return hw::SteadyTime::InfiniteFuture(); }
};

/// Work arrives as a count written to an eventfd (the doorbell) and is taken by Poll.
/// Records which threads ran it, and in what order polls, sleeps and posted tasks came.
class CountingPoller : public Poller {
 public:
  CountingPoller() : doorbell_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~CountingPoller() override { close(doorbell_); }

  int wake_fd() const override { return doorbell_; }
  bool Poll() override {
    Record('p');
    if (work_.exchange(0) == 0) return false;
    done_.fetch_add(1);
    if (engine_ != nullptr) {
      engine_->Post([this] {
        Record('t');
        if (on_task_) on_task_();
      });
    }
    return true;
  }
  hw::SteadyTime Sleeping() override {
    Record('s');
    sleeps_.fetch_add(1);
    return wake_after_ == absl::InfiniteDuration() ? hw::SteadyTime::InfiniteFuture()
                                                   : hw::SteadyNow() + wake_after_;
  }
  void Awake() override {
    Record('a');
    uint64_t count;
    (void)!read(doorbell_, &count, sizeof(count));
  }

  /// Gives Poll one piece of work and rings the doorbell.
  void Ring() {
    work_.fetch_add(1);
    const uint64_t one = 1;
    (void)!write(doorbell_, &one, sizeof(one));
  }
  /// Waits (bounded) until `ready` holds.
  template <typename Ready>
  static bool Eventually(Ready ready, std::chrono::seconds bound = std::chrono::seconds(60)) {
    const auto give_up = std::chrono::steady_clock::now() + bound;
    while (!ready()) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  Engine* engine_ = nullptr;  ///< set to have Poll post a task after each piece of work
  std::function<void()> on_task_;  ///< what that task does besides recording itself
  absl::Duration wake_after_ = absl::InfiniteDuration();
  std::atomic<int> done_{0};
  std::atomic<int> sleeps_{0};

  /// Whether the engine announced a sleep after the last task a poll posted ran.
  bool SleptSinceLastTask() {
    std::lock_guard<std::mutex> lock(mu_);
    auto task = std::find(events_.rbegin(), events_.rend(), 't');
    return std::find(events_.rbegin(), task, 's') != task;
  }

  /// Read once the engine stopped.
  std::vector<char> events() const { return events_; }
  std::vector<std::thread::id> threads() const { return threads_; }

 private:
  void Record(char what) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(what);
    threads_.push_back(std::this_thread::get_id());
  }

  const int doorbell_;
  std::atomic<int> work_{0};
  std::mutex mu_;
  std::vector<char> events_;
  std::vector<std::thread::id> threads_;
};

/// Gives the engine a deadline when asked (on the engine thread) and records when its
/// OnTimer ran at or past it.
class DeadlineHandler : public IdleHandler {
 public:
  hw::SteadyTime OnTimer(hw::SteadyTime now) override {
    if (now >= deadline_) {
      deadline_ = hw::SteadyTime::InfiniteFuture();
      expired_ = true;
    }
    return deadline_;
  }
  void Arm(hw::SteadyTime at) { deadline_ = at; }
  bool expired() const { return expired_.load(); }

 private:
  hw::SteadyTime deadline_ = hw::SteadyTime::InfiniteFuture();  // engine thread only
  std::atomic<bool> expired_{false};
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<EnginePtr> engine = CreateTcpEngine({}, &handler_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  IdleHandler handler_;
  EnginePtr engine_;
};

TEST_F(EngineTest, SleepingEngineWakesForItsPollersFd) {
  CountingPoller poller;
  engine_->AddPoller(&poller);
  ASSERT_TRUE(engine_->Start().ok());
  ASSERT_TRUE(CountingPoller::Eventually([&] { return poller.sleeps_.load() > 0; }));
  poller.Ring();
  ASSERT_TRUE(CountingPoller::Eventually([&] { return poller.done_.load() == 1; }));
  poller.Ring();
  ASSERT_TRUE(CountingPoller::Eventually([&] { return poller.done_.load() == 2; }));
  engine_->Stop();

  for (std::thread::id thread : poller.threads()) EXPECT_NE(thread, std::this_thread::get_id());
  // Every sleep announced is followed by a wake before the next poll or sleep (a wake
  // also comes while awake when the fd was rung then).
  bool asleep = false;
  for (char event : poller.events()) {
    if (event == 's') {
      EXPECT_FALSE(asleep);
      asleep = true;
    } else if (event == 'a') {
      asleep = false;
    } else {
      EXPECT_FALSE(asleep) << "polled while asleep";
    }
  }
}

TEST_F(EngineTest, TaskPostedByAPollerRunsBeforeTheNextPoll) {
  CountingPoller poller;
  poller.engine_ = engine_.get();
  engine_->AddPoller(&poller);
  ASSERT_TRUE(engine_->Start().ok());
  for (int i = 1; i <= 3; ++i) {
    poller.Ring();
    ASSERT_TRUE(CountingPoller::Eventually([&] { return poller.done_.load() == i; }));
  }
  // Rung while awake, the fd was cleared all the same: the engine goes back to sleep.
  EXPECT_TRUE(CountingPoller::Eventually([&] { return poller.SleptSinceLastTask(); }));
  engine_->Stop();

  const std::vector<char> events = poller.events();
  const std::vector<std::thread::id> threads = poller.threads();
  int tasks = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(threads[i], threads.front()) << "event " << i << " on another thread";
    if (events[i] != 't') continue;
    ++tasks;
    // The poll that posted it came last, with nothing (no sleep, no other poll) between.
    ASSERT_GT(i, 0u);
    EXPECT_EQ(events[i - 1], 'p');
  }
  EXPECT_EQ(tasks, 3);
}

TEST_F(EngineTest, SleepEndsAtTheTimeThePollerAsks) {
  CountingPoller poller;
  poller.wake_after_ = absl::Milliseconds(1);
  engine_->AddPoller(&poller);
  ASSERT_TRUE(engine_->Start().ok());
  // Nothing rings the fd: only the asked-for time wakes the engine, again and again.
  EXPECT_TRUE(CountingPoller::Eventually([&] { return poller.sleeps_.load() >= 5; }));
  engine_->Stop();
  EXPECT_EQ(poller.done_.load(), 0);
}

TEST(EngineSleepTest, DeadlineATaskSetsIsKeptWhenTheEngineSleepsRightAfterIt) {
  // With no spin the engine sleeps on the first turn after its work, as it did when
  // preempted for longer than its spin right after working. The deadline the task gave
  // the handler must reach the engine before that sleep, or nothing ends the sleep (as a
  // call's deadline and its clear-to-send, queued by a task, once waited for ever).
  DeadlineHandler handler;
  TcpEngineConfig config;
  config.spin = absl::ZeroDuration();
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine(config, &handler);
  ASSERT_TRUE(engine.ok()) << engine.status();
  CountingPoller poller;
  poller.engine_ = engine->get();
  poller.on_task_ = [&] { handler.Arm(hw::SteadyNow() + absl::Milliseconds(1)); };
  (*engine)->AddPoller(&poller);
  ASSERT_TRUE((*engine)->Start().ok());
  ASSERT_TRUE(CountingPoller::Eventually([&] { return poller.sleeps_.load() > 0; }));
  poller.Ring();
  // Within the test's own time: a sleep past the 1 ms deadline lasts until Stop().
  EXPECT_TRUE(
      CountingPoller::Eventually([&] { return handler.expired(); }, std::chrono::seconds(20)))
      << "the engine slept past the deadline its task set";
  (*engine)->Stop();
  EXPECT_EQ(poller.done_.load(), 1);
}

// An engine whose Start was never called (or failed: no thread to be had) stops as one that
// ran, twice too; joining the thread it never had ended the process.
TEST(EngineStopTest, AnEngineThatNeverStartedStops) {
  IdleHandler handler;
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine({}, &handler);
  ASSERT_TRUE(engine.ok()) << engine.status();
  (*engine)->Stop();
  (*engine)->Stop();
}

// A listener that cannot bind names its address as host:port, an IPv6 one bracketed (the
// error said 'bind 2001:db8::1:0').
TEST(EngineAddressTest, ABindThatFailsNamesTheAddressAsHostPort) {
  IdleHandler handler;
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine({.listen_host = "2001:db8::1"}, &handler);
  EXPECT_EQ(engine.status(), absl::UnavailableError("data port: bind [2001:db8::1]:0: Cannot "
                                                    "assign requested address"));
}

// A listener given a name announces the numeric address it bound, and a peer's data
// address must be numeric: the engine thread never waits for a name server.
TEST(EngineAddressTest, AnnouncesNumericAddressesAndConnectsOnlyToThem) {
  IdleHandler handler;
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine({.listen_host = "localhost"}, &handler);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string& address = (*engine)->address();
  EXPECT_TRUE(absl::StartsWith(address, "127.0.0.1:") || absl::StartsWith(address, "[::1]:"))
      << address;
  ASSERT_TRUE((*engine)->Start().ok());
  const std::string port = address.substr(address.rfind(':') + 1);
  std::promise<absl::Status> connected;
  (*engine)->Post(
      [&] { connected.set_value((*engine)->Connect({}, {}, "localhost:" + port).status()); });
  const absl::Status status = connected.get_future().get();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "data address host 'localhost' is not a numeric address");
  (*engine)->Stop();
}

/// Records, at the end of every loop turn, how many connections wait in the queue of the
/// listener at `port`.
class AcceptQueueHandler : public IdleHandler {
 public:
  hw::SteadyTime OnTimer(hw::SteadyTime) override {
    const int64_t queued = cclo::testing::UnreadAt(port);
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back(queued);
    return hw::SteadyTime::InfiniteFuture();
  }
  std::vector<int64_t> queued() {
    std::lock_guard<std::mutex> lock(mu_);
    return queued_;
  }

  uint16_t port = 0;  ///< set before the engine starts

 private:
  std::mutex mu_;
  std::vector<int64_t> queued_;
};

// Connections that come faster than the engine accepts them do not keep it accepting:
// a turn takes at most kAcceptsPerTurn of them, and the rest wait for the next turns.
TEST(EngineAcceptTest, ATurnAcceptsABatchAndLeavesTheRestQueued) {
  constexpr int64_t kWaiting = 3 * kAcceptsPerTurn + 8;
  AcceptQueueHandler handler;
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine({}, &handler);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::string& address = (*engine)->address();
  handler.port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  std::vector<int> clients;
  for (int64_t i = 0; i < kWaiting; ++i) {
    clients.push_back(cclo::testing::ConnectLoopback(address));
    ASSERT_GE(clients.back(), 0) << std::strerror(errno);
  }
  ASSERT_EQ(cclo::testing::UnreadAt(handler.port), kWaiting);
  ASSERT_TRUE((*engine)->Start().ok());
  ASSERT_TRUE(CountingPoller::Eventually([&] {
    const std::vector<int64_t> queued = handler.queued();
    return !queued.empty() && queued.back() == 0;
  }));
  (*engine)->Stop();
  const std::vector<int64_t> queued = handler.queued();
  EXPECT_EQ(queued.front(), kWaiting - static_cast<int64_t>(kAcceptsPerTurn));
  for (size_t turn = 1; turn < queued.size(); ++turn) {
    EXPECT_LE(queued[turn - 1] - queued[turn], static_cast<int64_t>(kAcceptsPerTurn))
        << "turn " << turn;
  }
  for (int fd : clients) close(fd);
}

TEST(EngineHandshakeTest, AcceptedConnectionsInTheirHandshakeAreBoundedApartFromOutgoingOnes) {
  // A peer that never answers: the engine's own handshake to it stays open throughout.
  std::string silent_address;
  const int silent = cclo::testing::ListenLoopback(&silent_address);
  ASSERT_GE(silent, 0) << std::strerror(errno);

  IdleHandler handler;
  TcpEngineConfig config;
  config.handshake_timeout = absl::Minutes(10);  // none ends before the test looks
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine(config, &handler);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->Start().ok());
  std::promise<absl::Status> connected;
  (*engine)->Post(
      [&] { connected.set_value((*engine)->Connect({}, {}, silent_address).status()); });
  ASSERT_TRUE(connected.get_future().get().ok());

  // Silent connections to the engine: the bound's worth is held; one more closes the
  // oldest, and the newest is served.
  std::vector<int> clients;
  for (size_t i = 0; i <= kMaxAcceptedHandshakes; ++i) {
    clients.push_back(cclo::testing::ConnectLoopback((*engine)->address()));
    ASSERT_GE(clients.back(), 0) << std::strerror(errno);
  }
  pollfd first{.fd = clients.front(), .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&first, 1, 60'000), 1) << "the oldest connection is still open";
  char byte;
  EXPECT_EQ(recv(clients.front(), &byte, 1, 0), 0);
  EXPECT_EQ((*engine)->wire_errors(), 1u);
  // The engine's own handshake was not taken for the oldest; the others stay open.
  for (size_t i = 1; i <= kMaxAcceptedHandshakes; ++i) {
    const ssize_t got = recv(clients[i], &byte, 1, MSG_DONTWAIT);
    const int error = errno;
    EXPECT_EQ(got, -1) << "connection " << i;
    EXPECT_EQ(error, EAGAIN) << "connection " << i;
  }
  // The newest is served: its HELLO for a communicator the engine does not know is
  // refused, with the reason, and counted.
  const CommId comm{5};
  const std::vector<std::byte> hello = EncodeControl({.kind = ControlKind::kHello,
                                                      .segment_bytes = 65536,
                                                      .timeout_ms = 10'000,
                                                      .connector = "127.0.0.1:1",
                                                      .acceptor = (*engine)->address()});
  SegmentHeader header{.type = SegmentType::kControl, .comm = comm};
  header.length = static_cast<uint32_t>(hello.size());
  header.total = header.length;
  const EncodedHeader encoded = Encode(header);
  ASSERT_EQ(send(clients.back(), encoded.data(), encoded.size(), 0),
            static_cast<ssize_t>(encoded.size()));
  ASSERT_EQ(send(clients.back(), hello.data(), hello.size(), 0),
            static_cast<ssize_t>(hello.size()));
  std::vector<std::byte> answer(kHeaderBytes + kMaxControlBytes);
  size_t have = 0;
  pollfd newest{.fd = clients.back(), .events = POLLIN, .revents = 0};
  while (poll(&newest, 1, 60'000) == 1) {
    const ssize_t got = recv(clients.back(), answer.data() + have, answer.size() - have, 0);
    if (got <= 0) break;
    have += static_cast<size_t>(got);
  }
  ASSERT_GT(have, kHeaderBytes);
  absl::StatusOr<SegmentHeader> refusal = Decode(answer.data(), have);
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  ASSERT_EQ(have, kHeaderBytes + refusal->length);
  absl::StatusOr<ControlMessage> refused =
      DecodeControl(answer.data() + kHeaderBytes, refusal->length);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->kind, ControlKind::kRefuse);
  EXPECT_EQ(refused->reason,
            absl::StrCat("unknown communicator ", CommIdHex(comm), " at ", (*engine)->address()));
  EXPECT_EQ((*engine)->wire_errors(), 2u);
  (*engine)->Stop();
  for (int fd : clients) close(fd);
  close(silent);
}

/// Reports the reason its one session closed with.
class ClosingHandler : public IdleHandler {
 public:
  void OnSessionClosed(Session&, const absl::Status& reason) override { closed_.set_value(reason); }
  std::future<absl::Status> Closed() { return closed_.get_future(); }

 private:
  std::promise<absl::Status> closed_;
};

/// Why the engine's data session to `address`, whose handshake has 300 ms, ended.
absl::Status HandshakeEnd(const std::string& address) {
  ClosingHandler handler;
  TcpEngineConfig config;
  config.handshake_timeout = absl::Milliseconds(300);
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine(config, &handler);
  if (!engine.ok()) return engine.status();
  if (absl::Status started = (*engine)->Start(); !started.ok()) return started;
  std::future<absl::Status> closed = handler.Closed();
  (*engine)->Post([&] { (void)(*engine)->Connect({}, {}, address); });
  const absl::Status reason = closed.wait_for(std::chrono::seconds(60)) == std::future_status::ready
                                  ? closed.get()
                                  : absl::UnknownError("the session did not end");
  (*engine)->Stop();
  return reason;
}

// A handshake that ends unfinished says its timeout, and whether the peer's host answered
// the connect at all: a partition drops it silently (here, a full accept queue does).
TEST(EngineHandshakeTest, AnUnfinishedHandshakeSaysItsTimeoutAndWhetherTheConnectWasAnswered) {
  std::string silent;
  const int listener = cclo::testing::ListenLoopback(&silent);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  // The kernel takes the connection for the listener, which never accepts it.
  EXPECT_EQ(HandshakeEnd(silent),
            absl::DeadlineExceededError(absl::StrCat(
                "handshake of the data session with ", silent, " for communicator ", CommIdHex({}),
                " did not finish within the handshake timeout of 300ms")));
  close(listener);

  std::string full;
  const int full_listener = cclo::testing::ListenLoopback(&full);
  ASSERT_GE(full_listener, 0) << std::strerror(errno);
  // Backlog 1: the kernel queues two connections, and drops the SYNs of the next.
  ASSERT_EQ(listen(full_listener, 1), 0) << std::strerror(errno);
  std::vector<int> queued;
  for (int i = 0; i < 2; ++i) {
    queued.push_back(cclo::testing::ConnectLoopback(full));
    ASSERT_GE(queued.back(), 0) << std::strerror(errno);
  }
  EXPECT_EQ(HandshakeEnd(full),
            absl::DeadlineExceededError(absl::StrCat(
                "handshake of the data session with ", full, " for communicator ", CommIdHex({}),
                " did not finish within the handshake timeout of 300ms: its connect got no answer "
                "(the host unreachable, or the port filtered or overloaded)")));
  for (int fd : queued) close(fd);
  close(full_listener);
}

}  // namespace
}  // namespace cclo::hw::poe::tcp
