#include "daemon/attach_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/v1/attach.h"
#include "cclo/v1/ring.h"
#include "daemon/unix_listener.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

constexpr absl::Duration kHelloTimeout = absl::Seconds(2);
/// How often a connection that sent part of its HELLO is looked at again (the thread never
/// waits for the rest: it serves every connection).
constexpr absl::Duration kPartialHelloRetry = absl::Milliseconds(5);
/// A client that does not read its attach socket for this long fails its AllocBuffer.
constexpr timeval kSendTimeout = {5, 0};

}  // namespace

absl::StatusOr<std::unique_ptr<AttachServer>> AttachServer::Start(
    const std::string& path, const TenantStore* tenants, SessionRegistry* sessions,
    SessionEndFn on_end, AdmitFn admit, OpenRingsFn open_rings, std::function<void()> on_pause) {
  absl::StatusOr<int> listening = ListenUnix("attach socket", path, 0666);
  if (!listening.ok()) return listening.status();
  const int fd = *listening;
  int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(fd);
    return Errno("eventfd");
  }
  std::unique_ptr<AttachServer> server(
      new AttachServer(path, fd, wake, tenants, sessions, std::move(on_end), std::move(admit),
                       std::move(open_rings), std::move(on_pause)));
  if (absl::Status started =
          hw::StartThread(server->thread_, path, [&run = *server] { run.Run(); });
      !started.ok()) {
    return started;
  }
  return server;
}

AttachServer::AttachServer(std::string path, int listen_fd, int wake_fd, const TenantStore* tenants,
                           SessionRegistry* sessions, SessionEndFn on_end, AdmitFn admit,
                           OpenRingsFn open_rings, std::function<void()> on_pause)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      tenants_(tenants),
      sessions_(sessions),
      on_end_(std::move(on_end)),
      admit_(std::move(admit)),
      open_rings_(std::move(open_rings)),
      on_pause_(std::move(on_pause)) {}

AttachServer::~AttachServer() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  for (const auto& [fd, pending] : pending_) close(fd);
  while (!connections_.empty()) EndSession(connections_.begin()->first);
  close(listen_fd_);
  close(wake_fd_);
  unlink(path_.c_str());
}

void AttachServer::Run() {
  std::vector<pollfd> fds;
  for (;;) {
    const bool accepting = hw::SteadyNow() >= accept_paused_until_;
    // poll skips a negative fd.
    fds.assign({{wake_fd_, POLLIN, 0}, {accepting ? listen_fd_ : -1, POLLIN, 0}});
    hw::SteadyTime next_deadline =
        accepting ? hw::SteadyTime::InfiniteFuture() : accept_paused_until_;
    std::vector<int> pending_fds;
    const hw::SteadyTime now = hw::SteadyNow();
    for (const auto& [fd, pending] : pending_) {
      const bool later = pending.look_again > now;  // a part of a HELLO is there
      fds.push_back({later ? -1 : fd, POLLIN, 0});
      pending_fds.push_back(fd);
      next_deadline = std::min(next_deadline, pending.deadline);
      if (later) next_deadline = std::min(next_deadline, pending.look_again);
    }
    const size_t first_connection = fds.size();
    for (const auto& [fd, session_id] : connections_) fds.push_back({fd, POLLIN, 0});
    const int timeout_ms =
        next_deadline == hw::SteadyTime::InfiniteFuture()
            ? -1
            : static_cast<int>(absl::ToInt64Milliseconds(std::max(next_deadline - hw::SteadyNow(),
                                                                  absl::ZeroDuration())) +
                               1);
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      const int error = errno;
      if (error == EINTR) continue;
      // Out of kernel memory for the whole set (ENOMEM), or more entries than the descriptor
      // limit lowered at run time allows (EINVAL), for now: wait on the wake fd alone (one
      // entry needs no memory), then try again.
      spdlog::error("attach server poll failed: {}; not accepting clients for {}",
                    std::strerror(error), absl::FormatDuration(hw::kAcceptBackoff));
      on_pause_();
      if (poll(fds.data(), 1, static_cast<int>(absl::ToInt64Milliseconds(hw::kAcceptBackoff))) >
          0) {
        return;
      }
      continue;
    }
    if (fds[0].revents) return;
    for (size_t i = 2; i < first_connection; ++i) {
      const int fd = pending_fds[i - 2];
      Pending& pending = pending_.at(fd);
      if (fds[i].revents != 0 && !WholeFrameOrEnd(fd)) {
        pending.look_again = hw::SteadyNow() + kPartialHelloRetry;
      } else if (fds[i].revents != 0) {
        const Pending greeted = pending;
        pending_.erase(fd);
        Greet(fd, greeted);
      } else if (hw::SteadyNow() >= pending.deadline) {
        const Pending refused = pending;
        pending_.erase(fd);
        Refuse(fd, refused.credentials,
               absl::DeadlineExceededError(
                   absl::StrCat("no HELLO within ", absl::FormatDuration(kHelloTimeout))));
      }
    }
    // After the pending connections' turn, which lists them as they were: accepting may
    // evict one.
    if (fds[1].revents & POLLIN) Accept();
    for (size_t i = first_connection; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char byte;
      ssize_t got = recv(fds[i].fd, &byte, 1, MSG_DONTWAIT);
      if (got > 0) {
        spdlog::warn("attach connection of session {} sent unexpected data; closing it",
                     connections_[fds[i].fd]);
      } else if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
        continue;
      }
      EndSession(fds[i].fd);
    }
  }
}

void AttachServer::Accept() {
  int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    if (hw::PausesAccepting(errno)) {
      spdlog::warn("attach accept failed: {}; not accepting clients for {}", std::strerror(errno),
                   absl::FormatDuration(hw::kAcceptBackoff));
      on_pause_();
      accept_paused_until_ = hw::SteadyNow() + hw::kAcceptBackoff;
    }
    return;
  }
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &kSendTimeout, sizeof(kSendTimeout));
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    spdlog::warn("attach: SO_PEERCRED failed: {}", std::strerror(errno));
    close(fd);
    return;
  }
  if (pending_.size() >= kMaxPending) EvictOldestPending();
  pending_[fd] = {hw::SteadyNow() + kHelloTimeout,
                  {credentials.pid, credentials.uid, credentials.gid}};
}

void AttachServer::EvictOldestPending() {
  // Every connection has the same HELLO timeout: the earliest deadline is the oldest.
  auto oldest = std::min_element(
      pending_.begin(), pending_.end(),
      [](const auto& a, const auto& b) { return a.second.deadline < b.second.deadline; });
  const int fd = oldest->first;
  const PeerCredentials credentials = oldest->second.credentials;
  pending_.erase(oldest);
  Refuse(fd, credentials,
         absl::ResourceExhaustedError(absl::StrCat("more than ", kMaxPending,
                                                   " attach connections were waiting for their "
                                                   "HELLO; the oldest is closed")));
}

bool AttachServer::WholeFrameOrEnd(int fd) {
  std::array<uint8_t, attach::kFrameBytes> frame;
  const ssize_t got = recv(fd, frame.data(), frame.size(), MSG_PEEK | MSG_DONTWAIT);
  if (got < 0) return errno != EAGAIN && errno != EINTR;
  return got == 0 || static_cast<size_t>(got) == frame.size();
}

void AttachServer::Greet(int fd, const Pending& pending) {
  // The whole HELLO is there (or the connection ended): this does not wait.
  absl::StatusOr<attach::Received> hello = attach::ReceiveFrame(fd, pending.deadline);
  absl::Status refusal;
  if (!hello.ok()) {
    refusal = hello.status();
  } else {
    if (hello->fd >= 0) {
      close(hello->fd);
      for (int extra : hello->more_fds) close(extra);
      refusal = absl::InvalidArgumentError("HELLO must not carry file descriptors");
    }
    if (hello->frame.type != attach::FrameType::kHello) {
      refusal = absl::InvalidArgumentError(
          absl::StrCat("expected a HELLO frame, got type ", static_cast<int>(hello->frame.type)));
    }
  }
  if (!refusal.ok()) return Refuse(fd, pending.credentials, refusal);
  const PeerCredentials& credentials = pending.credentials;
  if (absl::Status admitted = admit_(); !admitted.ok()) return Refuse(fd, credentials, admitted);
  absl::StatusOr<TenantPtr> tenant = tenants_->Identify(credentials.uid, credentials.gid);
  if (!tenant.ok()) return Refuse(fd, credentials, tenant.status());
  absl::StatusOr<Lease> lease = (*tenant)->Acquire(Resource::kSessions, 1);
  if (!lease.ok()) return Refuse(fd, credentials, lease.status());
  SessionPtr session = sessions_->Create(credentials, fd, *tenant, *std::move(lease));
  absl::StatusOr<std::vector<int>> ring_fds = open_rings_(session);
  if (!ring_fds.ok()) {
    DropNewSession(session);
    return Refuse(fd, credentials,
                  absl::Status(ring_fds.status().code(),
                               absl::StrCat("cannot open the session's command rings: ",
                                            ring_fds.status().message())));
  }
  attach::Frame welcome{attach::FrameType::kWelcome, session->id(), ring::kRingBytes,
                        session->token()};
  if (absl::Status sent = attach::SendFrame(fd, welcome, *ring_fds); !sent.ok()) {
    spdlog::warn("attach: welcome to pid {} failed: {}", credentials.pid,
                 std::string(sent.message()));
    DropNewSession(session);
    close(fd);
    return;
  }
  connections_[fd] = session->id();
  spdlog::info("session {} attached: pid {} uid {} gid {}, tenant '{}'", session->id(),
               credentials.pid, credentials.uid, credentials.gid, (*tenant)->name());
}

void AttachServer::DropNewSession(const SessionPtr& session) {
  // EndSession's work for a session that never had a connection here.
  sessions_->Remove(session->id());
  session->Close();
  on_end_(session);
}

void AttachServer::Refuse(int fd, const PeerCredentials& credentials, const absl::Status& reason) {
  spdlog::warn("attach from pid {} uid {} refused: {}", credentials.pid, credentials.uid,
               std::string(reason.message()));
  // The id carries the status code, so the client reports it as it is.
  attach::Frame refused{attach::FrameType::kRefused, static_cast<uint64_t>(reason.code()), 0,
                        std::string(reason.message().substr(0, attach::kTextBytes - 1))};
  (void)attach::SendFrame(fd, refused);
  close(fd);
}

void AttachServer::EndSession(int fd) {
  uint64_t session_id = connections_[fd];
  connections_.erase(fd);
  // Ends a frame send blocked on a client that does not read (an AllocBuffer's, which
  // holds the session's send lock that Close takes) at once, not at its send timeout.
  shutdown(fd, SHUT_RDWR);
  if (SessionPtr session = sessions_->Remove(session_id)) {
    spdlog::info("session {} ended (attach connection closed)", session_id);
    session->Close();
    on_end_(session);
  }
  close(fd);
}

}  // namespace cclo::daemon
