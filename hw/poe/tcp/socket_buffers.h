// Socket buffers sized to the bandwidth-delay product of a data session's path.
//
// Linux sizes a TCP socket's buffers itself (autotuning), up to net.ipv4.tcp_wmem[2] for
// sending and tcp_rmem[2] for receiving. On a LAN that is plenty: the link rate times the
// round trip is far below those limits. On a long path it caps one stream at about
// limit / round trip. So when a data session is up, its round trip is taken from the
// kernel (TCP_INFO's least so far: the path's own delay, without the queueing and delayed
// acknowledgements that the handshake's few samples include). Where twice the
// bandwidth-delay product at the configured link rate exceeds the send limit, the send
// buffer is set to it (SO_SNDBUFFORCE where the daemon may; else SO_SNDBUF, capped by
// net.core.wmem_max, and only if that still beats autotuning). Twice, because the kernel
// counts its bookkeeping in the buffer and a window is still unacknowledged while the
// next is sent. The receive side cannot be helped this late: the window scale is fixed
// when the connection opens, from tcp_rmem[2], so a short receive limit is reported
// with the setting to raise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace cclo::hw::poe::tcp {

/// The kernel's limits, in bytes as SO_SNDBUF and SO_RCVBUF report sizes.
struct AutotuneLimits {
  uint64_t send = 0;      ///< net.ipv4.tcp_wmem[2]: autotuning's send limit
  uint64_t receive = 0;   ///< net.ipv4.tcp_rmem[2]: autotuning's receive limit
  uint64_t send_max = 0;  ///< net.core.wmem_max: SO_SNDBUF's cap without CAP_NET_ADMIN
};

/// Reads them from /proc/sys/net; where a file cannot be read, the kernel's defaults.
AutotuneLimits ReadAutotuneLimits();

/// Largest buffer a session asks for, whatever its path: a bound on a configuration
/// mistake's cost.
inline constexpr uint64_t kMaxSocketBufferBytes = 256ull << 20;

/// Twice the bandwidth-delay product in bytes (even), at most kMaxSocketBufferBytes.
uint64_t WantedBufferBytes(uint64_t link_bytes_per_second, absl::Duration round_trip);

/// What SizeSocketBuffers found and did.
struct Sizing {
  absl::Duration round_trip;
  uint64_t wanted = 0;  ///< WantedBufferBytes
  uint64_t send = 0;    ///< the send buffer as set, or 0 if left to autotuning

  /// Whether the path gets less than wanted on either side (a warning, with what to raise).
  bool Short(const AutotuneLimits& limits) const;
  /// One line for the log.
  std::string Describe(uint64_t link_bytes_per_second, const AutotuneLimits& limits) const;
};

/// Sizes the send buffer of the connected TCP socket `fd` for its path; nullopt if
/// autotuning covers the path both ways (or its round trip is not known yet).
std::optional<Sizing> SizeSocketBuffers(int fd, uint64_t link_bytes_per_second,
                                        const AutotuneLimits& limits);

}  // namespace cclo::hw::poe::tcp
