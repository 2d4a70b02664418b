// Listening Unix sockets, and the accept loop of the local gRPC servers' (client.sock,
// admin.sock): gRPC 1.51's own listener stops for good when an accept fails for want of
// descriptors, so connections that fill the daemon's descriptors for a moment (any local
// user may connect to client.sock) would leave it serving no new client or ccloctl until a
// restart. This one pauses and goes on.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace grpc {
class Server;
}

namespace cclo::daemon {

/// INTERNAL: "`what`: <errno's text>".
absl::Status Errno(const std::string& what);

/// A Unix stream socket listening at `path` (replacing a stale socket file) with `mode`;
/// an error names it as `what` and `path`.
absl::StatusOr<int> ListenUnix(const std::string& what, const std::string& path, mode_t mode);

/// Accepts the connections of a Unix socket on a thread of its own and hands each to a gRPC
/// server; when an accept fails (hw::PausesAccepting) or polling does, it pauses for
/// hw::kAcceptBackoff at a time, logging each pause and calling `on_pause`.
class GrpcUnixListener {
 public:
  /// Listens at `path` with `mode` (ListenUnix) for `server`, which must have been built
  /// without a listening port of its own and outlive this.
  static absl::StatusOr<std::unique_ptr<GrpcUnixListener>> Start(const std::string& path,
                                                                 mode_t mode, grpc::Server* server,
                                                                 std::function<void()> on_pause);
  /// Stops accepting and closes the socket; the connections accepted stay the server's.
  ~GrpcUnixListener();

 private:
  GrpcUnixListener(std::string path, int listen_fd, int wake_fd, grpc::Server* server,
                   std::function<void()> on_pause);
  void Run();

  const std::string path_;
  const int listen_fd_;
  const int wake_fd_;  ///< an eventfd the destructor writes to end Run
  grpc::Server* const server_;
  const std::function<void()> on_pause_;
  std::thread thread_;  ///< runs Run once Start started it; joined by the destructor
};

}  // namespace cclo::daemon
