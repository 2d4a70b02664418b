// Socket buffer sizing on real loopback sockets: left alone where autotuning covers the
// path, set to twice the bandwidth-delay product where it does not.
#include "hw/poe/tcp/socket_buffers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace cclo::hw::poe::tcp {
namespace {

/// A connected loopback TCP pair that has exchanged a few bytes (so the kernel has
/// measured its round trip).
class LoopbackPair {
 public:
  LoopbackPair() {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    EXPECT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
    client_ = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client_, reinterpret_cast<sockaddr*>(&address), length), 0);
    server_ = accept(listener, nullptr, nullptr);
    close(listener);
    char byte = 'x';
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(write(client_, &byte, 1), 1);
      EXPECT_EQ(read(server_, &byte, 1), 1);
      EXPECT_EQ(write(server_, &byte, 1), 1);
      EXPECT_EQ(read(client_, &byte, 1), 1);
    }
  }
  ~LoopbackPair() {
    close(client_);
    close(server_);
  }
  int client() const { return client_; }

 private:
  int client_ = -1;
  int server_ = -1;
};

uint64_t Buffer(int fd, int option) {
  int bytes = 0;
  socklen_t size = sizeof(bytes);
  EXPECT_EQ(getsockopt(fd, SOL_SOCKET, option, &bytes, &size), 0);
  return static_cast<uint64_t>(bytes);
}

/// Whether this process may set buffers beyond the system's maxima (CAP_NET_ADMIN; Bazel's
/// sandbox drops it even for root).
bool MayForce() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int bytes = 4096;
  const bool may = setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) == 0;
  close(fd);
  return may;
}

/// The `field`th (from 0) number in a /proc/sys file.
uint64_t SysctlField(const char* path, int field) {
  std::ifstream file(path);
  uint64_t number = 0;
  for (int i = 0; i <= field; ++i) EXPECT_TRUE(file >> number) << path;
  return number;
}

TEST(SocketBuffersTest, WantedIsTwiceTheBandwidthDelayProductUpToTheBound) {
  // 1 Gb/s over a 40 ms round trip: 5 MB in flight.
  EXPECT_EQ(WantedBufferBytes(125'000'000, absl::Milliseconds(40)), 10'000'000u);
  EXPECT_EQ(WantedBufferBytes(125'000'000, absl::ZeroDuration()), 0u);
  EXPECT_EQ(WantedBufferBytes(12'500'000'000, absl::Seconds(1)), kMaxSocketBufferBytes);
}

TEST(SocketBuffersTest, AutotuneLimitsAreTheKernels) {
  const AutotuneLimits limits = ReadAutotuneLimits();
  EXPECT_EQ(limits.send, SysctlField("/proc/sys/net/ipv4/tcp_wmem", 2));
  EXPECT_EQ(limits.receive, SysctlField("/proc/sys/net/ipv4/tcp_rmem", 2));
  EXPECT_EQ(limits.send_max, SysctlField("/proc/sys/net/core/wmem_max", 0));
}

TEST(SocketBuffersTest, APathAutotuningCoversIsLeftAlone) {
  LoopbackPair pair;
  const uint64_t send = Buffer(pair.client(), SO_SNDBUF);
  // A loopback round trip at 100 Gb/s is far below any autotuning limit.
  EXPECT_FALSE(SizeSocketBuffers(pair.client(), 12'500'000'000, ReadAutotuneLimits()));
  EXPECT_FALSE(SizeSocketBuffers(pair.client(), 0, {.send = 1, .receive = 1, .send_max = 1}));
  EXPECT_EQ(Buffer(pair.client(), SO_SNDBUF), send);
}

TEST(SocketBuffersTest, ASendLimitShortOfThePathGetsTwiceItsProduct) {
  LoopbackPair pair;
  const uint64_t receive = Buffer(pair.client(), SO_RCVBUF);
  // Limits of 2 bytes: any round trip at a (fictitious) 1 TB/s exceeds them.
  const AutotuneLimits limits{
      .send = 2, .receive = 2, .send_max = SysctlField("/proc/sys/net/core/wmem_max", 0)};
  const std::optional<Sizing> sizing = SizeSocketBuffers(pair.client(), 1'000'000'000'000, limits);
  ASSERT_TRUE(sizing);
  EXPECT_GT(sizing->round_trip, absl::ZeroDuration());
  EXPECT_EQ(sizing->wanted, WantedBufferBytes(1'000'000'000'000, sizing->round_trip));
  EXPECT_EQ(sizing->send, Buffer(pair.client(), SO_SNDBUF));
  // The kernel doubles the half it is given; without CAP_NET_ADMIN the half is capped at
  // net.core.wmem_max.
  const uint64_t half = sizing->wanted / 2;
  EXPECT_EQ(sizing->send, MayForce() ? 2 * half : 2 * std::min(half, limits.send_max));
  // The receive side is never set: its window scale is fixed already.
  EXPECT_EQ(Buffer(pair.client(), SO_RCVBUF), receive);
  EXPECT_TRUE(sizing->Short(limits));
  const std::string line = sizing->Describe(1'000'000'000'000, limits);
  EXPECT_NE(line.find("at 8000 Gb/s"), std::string::npos) << line;
  EXPECT_NE(line.find(absl::StrCat("send buffer set to ", sizing->send, " bytes")),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(absl::StrCat("receive window at most 2 bytes")), std::string::npos) << line;
}

TEST(SocketBuffersTest, ACappedSendBufferThatWouldShrinkAutotuningIsNotSet) {
  LoopbackPair pair;
  const uint64_t send = Buffer(pair.client(), SO_SNDBUF);
  const uint64_t cap = SysctlField("/proc/sys/net/core/wmem_max", 0);
  // Autotuning may grow the buffer to twice what SO_SNDBUF could be set to without
  // CAP_NET_ADMIN: setting it would only shrink it.
  const AutotuneLimits limits{.send = 4 * cap, .receive = UINT64_MAX, .send_max = cap};
  const uint64_t rate = 1'000'000'000'000'000;  // enough for any loopback round trip
  const std::optional<Sizing> sizing = SizeSocketBuffers(pair.client(), rate, limits);
  ASSERT_TRUE(sizing);
  ASSERT_GT(sizing->wanted, limits.send);
  if (MayForce()) {
    EXPECT_EQ(sizing->send, sizing->wanted);
    EXPECT_FALSE(sizing->Short(limits));
  } else {
    EXPECT_EQ(sizing->send, 0u);
    EXPECT_EQ(Buffer(pair.client(), SO_SNDBUF), send);
    EXPECT_TRUE(sizing->Short(limits));
    const std::string line = sizing->Describe(rate, limits);
    EXPECT_NE(line.find("send buffer left to autotuning"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace cclo::hw::poe::tcp
