// The peer port's gRPC server, served again after its listener stopped: gRPC 1.51's own
// listener stops accepting for good when an accept fails for want of descriptors, so
// connections that fill the daemon's descriptors for a moment would leave it unable to root a
// communicator until a restart. cclod cannot accept the peer port itself, as it does the local
// sockets (GrpcUnixListener): gRPC 1.51 takes an accepted connection only without TLS.
#pragma once

#include <grpcpp/server.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hw/clock.h"

namespace cclo::daemon {

/// The Peer service's server. When gRPC logs that its listener stopped ('Failed accept4:
/// <reason>', passed on by ForwardGrpcLogs), a thread of its own logs the pause and, every
/// hw::kAcceptBackoff until one starts, starts another server on the same port (gRPC binds it
/// with SO_REUSEPORT), then shuts the stopped one down, which ends the calls it still serves
/// within `longest_call`; each failed accept and each failed start is a pause, logged and
/// counted by `on_pause`. One at a time in a process: gRPC's log names no server.
class PeerServer {
 public:
  using Build = std::function<absl::StatusOr<std::unique_ptr<grpc::Server>>()>;

  /// Starts the first server with `build`, which starts the later ones too.
  static absl::StatusOr<std::unique_ptr<PeerServer>> Start(const std::string& address, Build build,
                                                           absl::Duration longest_call,
                                                           std::function<void()> on_pause);
  /// Starts no other server and shuts the one serving down by `deadline`, after a stopped
  /// one that still ends its calls.
  void Shutdown(hw::SteadyTime deadline);
  /// Shutdown now, if not called yet.
  ~PeerServer();

 private:
  PeerServer(std::string address, Build build, absl::Duration longest_call,
             std::function<void()> on_pause, std::unique_ptr<grpc::Server> server);
  /// gRPC's log said a listener stopped: `reason` is what its accept failed with.
  void ListenerStopped(const std::string& reason);
  void Run();

  const std::string address_;
  const Build build_;
  const absl::Duration longest_call_;
  const std::function<void()> on_pause_;
  absl::Mutex mu_;
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(mu_);
  std::string stopped_reason_ ABSL_GUARDED_BY(mu_);  ///< empty while the listener serves
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  ///< runs Run; joined by Shutdown
};

}  // namespace cclo::daemon
