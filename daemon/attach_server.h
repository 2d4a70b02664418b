// The attach socket: where clients prove who they are (SO_PEERCRED) and receive their
// session token and buffer fds. One thread polls the listening socket and every live
// attach connection; a closed connection ends its session.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/sessions.h"
#include "daemon/tenants.h"
#include "hw/clock.h"

namespace cclo::daemon {

class AttachServer {
 public:
  /// Most connections that may wait for their HELLO at once; one more closes the oldest of
  /// them (REFUSED, RESOURCE_EXHAUSTED). An app sends its HELLO as it connects, so holding
  /// every slot takes a flood of connections faster than that, not one per slot per HELLO
  /// timeout, and the descriptors they hold stay bounded.
  static constexpr size_t kMaxPending = 256;

  using SessionEndFn = std::function<void(const SessionPtr&)>;
  using AdmitFn = std::function<absl::Status()>;
  /// Makes a new session's rings; returns the fds its WELCOME carries (owned by the callee).
  using OpenRingsFn = std::function<absl::StatusOr<std::vector<int>>(const SessionPtr&)>;

  /// Binds `path` (replacing a stale socket file) with mode 0666 and starts serving. A
  /// caller becomes a session of the tenant `tenants` maps it to, charged to that tenant's
  /// sessions quota; an unknown caller or a full quota is refused with the reason.
  /// `on_end` runs on the server thread after a client's connection closed. `admit` is
  /// asked before each new session; an error refuses the caller with it (code and text).
  /// `open_rings` makes each new session's rings, whose fds go with its WELCOME. `on_pause`
  /// runs each time accepting pauses after an accept (hw::PausesAccepting) or the wait for
  /// one failed.
  static absl::StatusOr<std::unique_ptr<AttachServer>> Start(
      const std::string& path, const TenantStore* tenants, SessionRegistry* sessions,
      SessionEndFn on_end, AdmitFn admit, OpenRingsFn open_rings, std::function<void()> on_pause);
  /// Stops serving, ends every session (running `on_end`) and removes the socket file.
  ~AttachServer();

 private:
  AttachServer(std::string path, int listen_fd, int wake_fd, const TenantStore* tenants,
               SessionRegistry* sessions, SessionEndFn on_end, AdmitFn admit,
               OpenRingsFn open_rings, std::function<void()> on_pause);
  /// A connection accepted but not yet greeted: it must send HELLO by `deadline`.
  struct Pending {
    hw::SteadyTime deadline;
    PeerCredentials credentials;
    hw::SteadyTime look_again =
        hw::SteadyTime::InfinitePast();  ///< part of a HELLO came: not before then
  };

  void Run();
  void Accept();
  /// Refuses the connection that has waited longest for its HELLO (kMaxPending).
  void EvictOldestPending();
  /// Whether a whole frame waits on `fd`, or the connection ended or failed.
  static bool WholeFrameOrEnd(int fd);
  /// Reads the HELLO of a pending connection and answers WELCOME or REFUSED.
  void Greet(int fd, const Pending& pending);
  /// Undoes a session made for a connection that gets no WELCOME.
  void DropNewSession(const SessionPtr& session);
  void Refuse(int fd, const PeerCredentials& credentials, const absl::Status& reason);
  void EndSession(int fd);

  const std::string path_;
  const int listen_fd_;
  const int wake_fd_;  ///< eventfd that stops Run()
  const TenantStore* const tenants_;
  SessionRegistry* const sessions_;
  const SessionEndFn on_end_;
  const AdmitFn admit_;
  const OpenRingsFn open_rings_;
  const std::function<void()> on_pause_;
  /// Touched only by the server thread: greeted connections (fd -> session id) and
  /// connections still owing their HELLO.
  std::map<int, uint64_t> connections_;
  std::map<int, Pending> pending_;
  /// Out of descriptors: the listening socket is not polled until then.
  hw::SteadyTime accept_paused_until_ = hw::SteadyTime::InfinitePast();
  std::thread thread_;  ///< runs Run once Start started it; joined by the destructor
};

}  // namespace cclo::daemon
