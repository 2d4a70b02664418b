#include "hw/poe/tcp/socket_buffers.h"

#include <linux/tcp.h>  // tcp_info with tcpi_min_rtt (glibc's lacks it)
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace cclo::hw::poe::tcp {
namespace {

/// The third of the three numbers in `path`, or `otherwise`.
uint64_t ThirdField(const char* path, uint64_t otherwise) {
  std::ifstream file(path);
  uint64_t least = 0, initial = 0, most = 0;
  if (!(file >> least >> initial >> most) || most == 0) return otherwise;
  return most;
}

/// Sets one buffer (SO_SNDBUF or SO_RCVBUF, forced if allowed) so that it reports `bytes`;
/// returns what it reports then.
uint64_t SetBuffer(int fd, int option, int forced, uint64_t bytes) {
  // The kernel doubles the value it is given (for its bookkeeping) and reports the double.
  const int half = static_cast<int>(std::min<uint64_t>(bytes / 2, INT32_MAX));
  if (setsockopt(fd, SOL_SOCKET, forced, &half, sizeof(half)) != 0) {
    (void)setsockopt(fd, SOL_SOCKET, option, &half, sizeof(half));
  }
  int now = 0;
  socklen_t size = sizeof(now);
  if (getsockopt(fd, SOL_SOCKET, option, &now, &size) != 0) return 0;
  return static_cast<uint64_t>(now);
}

}  // namespace

AutotuneLimits ReadAutotuneLimits() {
  return {.send = ThirdField("/proc/sys/net/ipv4/tcp_wmem", 4ull << 20),
          .receive = ThirdField("/proc/sys/net/ipv4/tcp_rmem", 6ull << 20)};
}

uint64_t WantedBufferBytes(uint64_t link_bytes_per_second, absl::Duration round_trip) {
  const double product = static_cast<double>(link_bytes_per_second) *
                         absl::ToDoubleSeconds(std::max(round_trip, absl::ZeroDuration()));
  const auto bytes =
      static_cast<uint64_t>(std::min(2 * product, static_cast<double>(kMaxSocketBufferBytes)));
  return bytes & ~uint64_t{1};  // the kernel keeps even sizes
}

bool Sizing::Short() const {
  return (send != 0 && send < wanted) || (receive != 0 && receive < wanted);
}

std::string Sizing::Describe(uint64_t link_bytes_per_second, const AutotuneLimits& limits) const {
  auto buffer = [](uint64_t bytes) {
    return bytes == 0 ? std::string("left to autotuning") : absl::StrCat(bytes, " bytes");
  };
  std::string line = absl::StrCat(
      "round trip ", absl::FormatDuration(round_trip), "; twice the bandwidth-delay product at ",
      link_bytes_per_second * 8 / 1'000'000'000, " Gb/s is ", wanted,
      " bytes, beyond the kernel's autotuning limits (send ", limits.send, ", receive ",
      limits.receive, "): send buffer ", buffer(send), ", receive buffer ", buffer(receive));
  if (Short()) {
    absl::StrAppend(&line,
                    ", short of it: raise net.core.wmem_max and net.core.rmem_max, or give "
                    "cclod CAP_NET_ADMIN");
  }
  return line;
}

std::optional<Sizing> SizeSocketBuffers(int fd, uint64_t link_bytes_per_second,
                                        const AutotuneLimits& limits) {
  tcp_info info{};
  socklen_t size = sizeof(info);
  if (link_bytes_per_second == 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0 ||
      info.tcpi_min_rtt == 0) {
    return std::nullopt;
  }
  Sizing sizing;
  sizing.round_trip = absl::Microseconds(info.tcpi_min_rtt);
  sizing.wanted = WantedBufferBytes(link_bytes_per_second, sizing.round_trip);
  if (sizing.wanted <= limits.send && sizing.wanted <= limits.receive) return std::nullopt;
  if (sizing.wanted > limits.send) {
    sizing.send = SetBuffer(fd, SO_SNDBUF, SO_SNDBUFFORCE, sizing.wanted);
  }
  if (sizing.wanted > limits.receive) {
    sizing.receive = SetBuffer(fd, SO_RCVBUF, SO_RCVBUFFORCE, sizing.wanted);
  }
  return sizing;
}

}  // namespace cclo::hw::poe::tcp
