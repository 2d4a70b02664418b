#include "hw/poe/tcp/socket_buffers.h"

#include <linux/tcp.h>  // tcp_info with tcpi_min_rtt (glibc's lacks it)
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace cclo::hw::poe::tcp {
namespace {

/// The `field`th (from 0) number in `path`, or `otherwise`.
uint64_t Field(const char* path, int field, uint64_t otherwise) {
  std::ifstream file(path);
  uint64_t number = 0;
  for (int i = 0; i <= field; ++i) {
    if (!(file >> number)) return otherwise;
  }
  return number == 0 ? otherwise : number;
}

/// What SO_SNDBUF reports now.
uint64_t SendBuffer(int fd) {
  int bytes = 0;
  socklen_t size = sizeof(bytes);
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &size) != 0) return 0;
  return static_cast<uint64_t>(bytes);
}

/// Sets the send buffer so that it reports `wanted` (the kernel doubles the value it is
/// given, for its bookkeeping), beyond net.core.wmem_max where allowed. Without that
/// right it is capped, and set only if the cap still beats autotuning's limit (setting it
/// turns autotuning off). Returns the size it reports, or 0 if left alone.
uint64_t SetSendBuffer(int fd, uint64_t wanted, const AutotuneLimits& limits) {
  const int half = static_cast<int>(std::min<uint64_t>(wanted / 2, INT32_MAX));
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &half, sizeof(half)) == 0) return SendBuffer(fd);
  if (2 * std::min<uint64_t>(half, limits.send_max) <= limits.send) return 0;
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &half, sizeof(half)) != 0) return 0;
  return SendBuffer(fd);
}

}  // namespace

AutotuneLimits ReadAutotuneLimits() {
  return {.send = Field("/proc/sys/net/ipv4/tcp_wmem", 2, 4ull << 20),
          .receive = Field("/proc/sys/net/ipv4/tcp_rmem", 2, 6ull << 20),
          .send_max = Field("/proc/sys/net/core/wmem_max", 0, 212992)};
}

uint64_t WantedBufferBytes(uint64_t link_bytes_per_second, absl::Duration round_trip) {
  const double product = static_cast<double>(link_bytes_per_second) *
                         absl::ToDoubleSeconds(std::max(round_trip, absl::ZeroDuration()));
  const auto bytes =
      static_cast<uint64_t>(std::min(2 * product, static_cast<double>(kMaxSocketBufferBytes)));
  return bytes & ~uint64_t{1};  // the kernel keeps even sizes
}

bool Sizing::Short(const AutotuneLimits& limits) const {
  return (wanted > limits.send && send < wanted) || wanted > limits.receive;
}

std::string Sizing::Describe(uint64_t link_bytes_per_second, const AutotuneLimits& limits) const {
  std::string line = absl::StrCat(
      "round trip ", absl::FormatDuration(round_trip), "; twice the bandwidth-delay product at ",
      link_bytes_per_second * 8 / 1'000'000'000, " Gb/s is ", wanted, " bytes; ");
  if (wanted <= limits.send) {
    absl::StrAppend(&line, "send: autotuning reaches it (up to ", limits.send, ")");
  } else if (send == 0) {
    absl::StrAppend(&line, "send buffer left to autotuning (up to ", limits.send,
                    "): net.core.wmem_max allows no more; raise it or give cclod CAP_NET_ADMIN");
  } else if (send < wanted) {
    absl::StrAppend(&line, "send buffer set to ", send,
                    " bytes, short of it: raise net.core.wmem_max or give cclod CAP_NET_ADMIN");
  } else {
    absl::StrAppend(&line, "send buffer set to ", send, " bytes");
  }
  if (wanted <= limits.receive) {
    absl::StrAppend(&line, "; receive: autotuning reaches it (up to ", limits.receive, ")");
  } else {
    absl::StrAppend(&line, "; receive window at most ", limits.receive,
                    " bytes (net.ipv4.tcp_rmem's maximum, fixed when the connection opens): "
                    "raise it to ",
                    wanted);
  }
  return line;
}

std::optional<Sizing> SizeSocketBuffers(int fd, uint64_t link_bytes_per_second,
                                        const AutotuneLimits& limits) {
  tcp_info info{};
  socklen_t size = sizeof(info);
  // No sample yet reads as 0 (old kernels) or all ones.
  if (link_bytes_per_second == 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0 ||
      info.tcpi_min_rtt == 0 || info.tcpi_min_rtt == UINT32_MAX) {
    return std::nullopt;
  }
  Sizing sizing;
  sizing.round_trip = absl::Microseconds(info.tcpi_min_rtt);
  sizing.wanted = WantedBufferBytes(link_bytes_per_second, sizing.round_trip);
  if (sizing.wanted <= limits.send && sizing.wanted <= limits.receive) return std::nullopt;
  if (sizing.wanted > limits.send) sizing.send = SetSendBuffer(fd, sizing.wanted, limits);
  return sizing;
}

}  // namespace cclo::hw::poe::tcp
