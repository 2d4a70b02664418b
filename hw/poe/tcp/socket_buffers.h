// Socket buffers sized to the bandwidth-delay product of a data session's path.
//
// Linux sizes a TCP socket's buffers itself (autotuning), up to net.ipv4.tcp_wmem[2] for
// sending and tcp_rmem[2] for receiving. On a LAN that is plenty: the link rate times the
// round trip is far below those limits. On a long path it caps one stream at about
// limit / round trip. So when a data session is up, its round trip is taken from the kernel
// (TCP_INFO's least so far: the path's own delay, without the queueing and delayed
// acknowledgements that the handshake's few samples include), and where twice the bandwidth-delay product at the configured
// link rate exceeds an autotuning limit, that buffer is set to it (SO_SNDBUFFORCE and
// SO_RCVBUFFORCE where the daemon may, else SO_SNDBUF and SO_RCVBUF, which
// net.core.wmem_max and rmem_max cap). Twice, because half of a TCP buffer goes to the
// kernel's bookkeeping (tcp_adv_win_scale 1) and a window's worth is still unacknowledged
// while the next is sent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace cclo::hw::poe::tcp {

/// The kernel's autotuning limits, in bytes (as SO_SNDBUF and SO_RCVBUF report sizes).
struct AutotuneLimits {
  uint64_t send = 0;
  uint64_t receive = 0;
};

/// The third fields of /proc/sys/net/ipv4/tcp_wmem and tcp_rmem; where a file cannot be
/// read, the kernel's defaults (4 MiB and 6 MiB).
AutotuneLimits ReadAutotuneLimits();

/// Largest buffer a session asks for, whatever its path: a bound on a configuration
/// mistake's cost.
inline constexpr uint64_t kMaxSocketBufferBytes = 256ull << 20;

/// Twice the bandwidth-delay product in bytes (even), at most kMaxSocketBufferBytes.
uint64_t WantedBufferBytes(uint64_t link_bytes_per_second, absl::Duration round_trip);

/// What SizeSocketBuffers did.
struct Sizing {
  absl::Duration round_trip;
  uint64_t wanted = 0;   ///< WantedBufferBytes
  uint64_t send = 0;     ///< the send buffer as set, or 0 if left to autotuning
  uint64_t receive = 0;  ///< the receive buffer as set, or 0 if left to autotuning

  /// A buffer that was set came out smaller than wanted (the system's maxima).
  bool Short() const;
  /// One line for the log.
  std::string Describe(uint64_t link_bytes_per_second, const AutotuneLimits& limits) const;
};

/// Sizes the buffers of the connected TCP socket `fd` for its path; nullopt if autotuning
/// covers it (or the round trip is unknown).
std::optional<Sizing> SizeSocketBuffers(int fd, uint64_t link_bytes_per_second,
                                        const AutotuneLimits& limits);

}  // namespace cclo::hw::poe::tcp
