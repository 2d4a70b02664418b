#include "daemon/peer_client.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "hw/clock.h"

namespace cclo::daemon {
namespace {

// A TCP listener on loopback that accepts into its backlog and never answers: a root
// daemon that hangs.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A daemon that stops while one of its ranks waits at a root that does not answer ends
// that join at once, and refuses joins after it.
TEST(PeerClientTest, StopEndsAJoinInProgressAndRefusesLaterOnes) {
  SilentListener root;
  PeerClient client(grpc::InsecureChannelCredentials());
  absl::StatusOr<cclo::v1::PeerJoinResponse> joined;
  std::thread joining([&] {
    joined = client.Join(root.address(), cclo::v1::PeerJoinRequest(),
                         hw::SteadyNow() + absl::Seconds(120));
  });
  absl::SleepFor(absl::Milliseconds(300));  // the join is on its way or waiting; both end
  client.Stop();
  joining.join();
  EXPECT_EQ(joined.status(), absl::UnavailableError("this daemon is shutting down"));
  EXPECT_EQ(
      client.Join(root.address(), cclo::v1::PeerJoinRequest(), hw::SteadyNow() + absl::Seconds(120))
          .status(),
      absl::UnavailableError("this daemon is shutting down"));
}

// Every token names its root's address; the channels cached for them stay bounded.
TEST(PeerClientTest, TheChannelCacheKeepsTheMostRecentlyUsed) {
  PeerClient client(grpc::InsecureChannelCredentials());
  for (size_t i = 0; i < PeerClient::kMaxChannels + 10; ++i) {
    // Port 1 on loopback refuses at once (or the deadline passes): only the cache matters.
    (void)client.Join(absl::StrCat("127.0.0.", i + 2, ":1"), cclo::v1::PeerJoinRequest(),
                      hw::SteadyNow() + absl::Milliseconds(50));
  }
  EXPECT_EQ(client.channels(), PeerClient::kMaxChannels);
}

}  // namespace
}  // namespace cclo::daemon
