// The peer port's gRPC server, served again after its listener stopped: gRPC 1.51's own
// listener stops accepting for good when an accept fails for want of descriptors, so
// connections that fill the daemon's descriptors for a moment would leave it unable to root a
// communicator until a restart. cclod cannot accept the peer port itself, as it does the local
// sockets (GrpcUnixListener): gRPC 1.51 takes an accepted connection only without TLS.
#pragma once

#include <grpcpp/server.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hw/clock.h"

namespace cclo::daemon {

/// The Peer service's server. When gRPC logs that its listener stopped ('Failed accept4:
/// <reason>', passed on by ForwardGrpcLogs), a thread of its own logs the pause and, every
/// hw::kAcceptBackoff until one starts, starts another server on the same port (gRPC binds it
/// with SO_REUSEPORT); each failed accept and each failed start is a pause, logged and
/// counted by `on_pause`. The stopped server is shut down on a thread of its own (inline where
/// none can be had): the calls it serves (joins waiting for their gather) end within
/// `longest_call`, and its listening socket closes once gRPC let go of it, which
/// resets the connections queued on it meanwhile, and those the kernel gave it since while
/// it still shared the port (a daemon's join tries again, see PeerClient::Join; a bare gRPC
/// client's call fails UNAVAILABLE; with the sysctl net.ipv4.tcp_migrate_req they would
/// move to the new listener).
/// One at a time in a process: gRPC's log names no server, so a stop logged by a stopped
/// server's second listener (a host name with several addresses) also restarts its
/// successor.
class PeerServer {
 public:
  using Build = std::function<absl::StatusOr<std::unique_ptr<grpc::Server>>()>;

  /// Starts the first server with `build`, which starts the later ones too.
  static absl::StatusOr<std::unique_ptr<PeerServer>> Start(const std::string& address, Build build,
                                                           absl::Duration longest_call,
                                                           std::function<void()> on_pause);
  /// Starts no other server, shuts the one serving down by `deadline` and waits for the
  /// stopped ones to end their calls (up to `longest_call` from their stop).
  void Shutdown(hw::SteadyTime deadline);
  /// Shutdown now, if not called yet.
  ~PeerServer();

 private:
  /// A stopped server's shutdown, on a thread of its own.
  struct Retiring {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  PeerServer(std::string address, Build build, absl::Duration longest_call,
             std::function<void()> on_pause);
  /// gRPC's log said a listener stopped: `reason` is what its accept failed with.
  void ListenerStopped(const std::string& reason);
  void Run();
  /// Shuts `stopped` down on a thread of its own, after joining those that ended.
  void Retire(std::unique_ptr<grpc::Server> stopped);

  const std::string address_;
  const Build build_;
  const absl::Duration longest_call_;
  const std::function<void()> on_pause_;
  absl::Mutex mu_;
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(mu_);
  std::string stopped_reason_ ABSL_GUARDED_BY(mu_);  ///< empty while the listener serves
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  hw::SteadyTime stop_deadline_ ABSL_GUARDED_BY(mu_);  ///< Shutdown's, once stopping_
  std::thread thread_;                                 ///< runs Run; joined by Shutdown
  std::vector<Retiring> retiring_;                     ///< Run's, then Shutdown's
};

}  // namespace cclo::daemon
