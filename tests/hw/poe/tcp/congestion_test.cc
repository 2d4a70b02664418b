// Data sessions take the engine's TCP congestion control (TcpEngineConfig::congestion),
// the outgoing one and the accepted one alike; a name the kernel does not offer fails the
// engine's creation with the names it does. (Run as root: CAP_NET_ADMIN may set any it
// offers.)
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "hw/clock.h"
#include "hw/poe/tcp/engine.h"

namespace cclo::hw::poe::tcp {
namespace {

const CommId kComm{7};
const CommSecret kSecret{8};

/// Admits every session and records its socket's congestion control once it is up.
class RecordingHandler : public EngineHandler {
 public:
  absl::StatusOr<CommSecret> Secret(const CommId&) override { return kSecret; }
  void OnAuthenticated(Session& session) override {
    session.Admit();
    Record(session);
  }
  void OnSessionUp(Session& session) override { Record(session); }
  void OnSessionClosed(Session&, const absl::Status&) override {}
  absl::StatusOr<std::byte*> OnSegment(Session&, const SegmentHeader&) override {
    return absl::InternalError("no segments expected");
  }
  absl::Status OnPayload(Session&, const SegmentHeader&) override { return absl::OkStatus(); }
  hw::SteadyTime OnTimer(hw::SteadyTime) override { return hw::SteadyTime::InfiniteFuture(); }

  std::future<std::string> Up() { return up_.get_future(); }

 private:
  void Record(Session& session) {
    char name[16] = {};
    socklen_t size = sizeof(name);
    const int fd = static_cast<TcpSession&>(session).fd();
    up_.set_value(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &size) == 0 ? name : "?");
  }

  std::promise<std::string> up_;
};

/// A congestion control this kernel offers that is not the host's default, so that a
/// session left with the default shows.
std::string NotTheDefault() {
  std::string current;
  std::ifstream("/proc/sys/net/ipv4/tcp_congestion_control") >> current;
  return current == "reno" ? "cubic" : "reno";  // reno is built into every kernel
}

TEST(CongestionTest, BothEndsOfASessionUseTheConfiguredOne) {
  const std::string wanted = NotTheDefault();
  RecordingHandler handlers[2];
  EnginePtr engines[2];
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<EnginePtr> engine = CreateTcpEngine({.congestion = wanted}, &handlers[i]);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engines[i] = *std::move(engine);
    ASSERT_TRUE(engines[i]->Start().ok());
  }
  // One session, from the first engine to the second.
  Engine& connecting = *engines[0];
  const std::string& acceptor = engines[1]->address();
  std::promise<absl::Status> connected;
  connecting.Post(
      [&] { connected.set_value(connecting.Connect(kComm, kSecret, acceptor).status()); });
  ASSERT_TRUE(connected.get_future().get().ok());
  for (RecordingHandler& handler : handlers) {
    std::future<std::string> up = handler.Up();
    ASSERT_EQ(up.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_EQ(up.get(), wanted);
  }
  for (EnginePtr& engine : engines) engine->Stop();
}

TEST(CongestionTest, ANameTheKernelDoesNotOfferFailsTheEngine) {
  RecordingHandler handler;
  absl::StatusOr<EnginePtr> engine = CreateTcpEngine({.congestion = "no_such_cc"}, &handler);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(engine.status().message(),
                               "TCP congestion control 'no_such_cc': this kernel does not offer "
                               "it (not built in or not loaded; it offers: "))
      << engine.status();
  EXPECT_TRUE(absl::StrContains(engine.status().message(), "reno")) << engine.status();
}

TEST(CongestionTest, NamesAreWhatTheKernelCouldTake) {
  for (const std::string name : {"cubic", "bbr", "dctcp", "Reno", "tcp_lp", "abcdefghijklmno"}) {
    EXPECT_TRUE(IsCongestionName(name)) << name;
  }
  for (const std::string name : {"", "abcdefghijklmnop", "cubic; reno", "bbr\n", "../reno"}) {
    EXPECT_FALSE(IsCongestionName(name)) << name;
  }
}

}  // namespace
}  // namespace cclo::hw::poe::tcp
