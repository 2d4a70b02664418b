// Loopback TCP sockets for tests: a listener on an ephemeral port, a blocking connection,
// what the kernel still holds unread at a socket, and who listens at a port (/proc/net/tcp).
#pragma once

#include <cstdint>
#include <string>

namespace cclo::testing {

/// A socket listening on 127.0.0.1 at an ephemeral port, its "127.0.0.1:port" in
/// `address`; -1 on failure.
int ListenLoopback(std::string* address);

/// A blocking socket connected to `address` ("127.0.0.1:port"); -1 on failure (errno set).
int ConnectLoopback(const std::string& address);

/// Bytes unread at the 127.0.0.1 socket with local port `local` and remote 127.0.0.1 port
/// `remote`, per rx_queue in /proc/net/tcp (or tcp6, for a dual-stack socket); with
/// `remote` 0, the listener's connections waiting to be accepted. -1 if there is no such
/// socket.
int64_t UnreadAt(uint16_t local, uint16_t remote = 0);

/// How many sockets listen at 127.0.0.1:`port` (/proc/net/tcp and tcp6): more than one
/// where several bound it with SO_REUSEPORT.
int ListeningAt(uint16_t port);

}  // namespace cclo::testing
