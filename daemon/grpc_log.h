// gRPC's and protobuf's own log lines in cclod's log: same sink, format and levels as the
// rest.
#pragma once

#include <functional>
#include <string>

namespace cclo::daemon {

/// From now on gRPC logs through spdlog as "grpc: <file>:<line>: <message>" (gRPC errors
/// as errors, its info and debug lines as debug and trace). A failed handshake on a
/// server port, which gRPC reports only at debug level and without the peer's address,
/// becomes a warning: only the TLS peer port has handshakes that fail, and the line is
/// the only trace on this side of a peer daemon refused or refusing. Protobuf's lines
/// (what it cannot parse or serialize) come as "protobuf: <file>:<line>: <message>". Call
/// once, before gRPC starts.
void ForwardGrpcLogs();

/// From now on gRPC's line saying a listener stopped accepting for good ('Failed accept4:
/// <reason>', gRPC 1.51's tcp_server_posix.cc) also calls `stopped` with the reason, from
/// the gRPC thread that logged it; nullptr calls nothing. Once this returns, the `stopped`
/// it replaced is not running and is not called again.
void OnListenerStopped(std::function<void(const std::string& reason)> stopped);

/// Gives gRPC and protobuf back their own stderr loggers (before spdlog goes away at exit).
void StopForwardingGrpcLogs();

}  // namespace cclo::daemon
