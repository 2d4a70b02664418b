#include "client/session.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cclo::client {
namespace {

constexpr char kSessionMetadata[] = "cclo-session";

// The sessions open in this process, for the fork handlers (Session::DropAttachSocketCopy).
// Leaked: a session may outlive static destruction.
std::mutex open_sessions_mutex;
std::set<Session*>& OpenSessions() {
  static auto* sessions = new std::set<Session*>();
  return *sessions;
}

// Connects by `deadline`: a daemon that does not accept fills its listen backlog, and a
// connect then waits for room for at most the socket's send timeout.
absl::StatusOr<int> ConnectUnix(const std::string& path, hw::SteadyTime deadline) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path '", path, "' has ", path.size(),
                                                   " bytes; at most ", sizeof(address.sun_path) - 1,
                                                   " fit"));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int result;
  do {
    const timeval wait =
        absl::ToTimeval(std::max(deadline - hw::SteadyNow(), absl::Microseconds(1)));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
    result = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  } while (result < 0 && errno == EINTR && hw::SteadyNow() < deadline);
  if (result < 0) {
    absl::Status status = absl::UnavailableError(absl::StrCat(
        "cannot connect to ", path, ": ",
        errno == EAGAIN ? "its backlog stayed full until the attach deadline (cclod is not "
                          "accepting)"
                        : std::strerror(errno)));
    close(fd);
    return status;
  }
  const timeval forever{};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &forever, sizeof(forever));
  return fd;
}

// Says HELLO on `fd`, connected to `path`, and waits for the answer: the WELCOME frame with
// the rings' fds (memfd, command doorbell, completion doorbell), or the refusal as an error.
absl::StatusOr<attach::Received> Handshake(int fd, const std::string& path,
                                           hw::SteadyTime deadline) {
  auto failed = [&](const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrCat("attach handshake on ", path, ": ", status.message()));
  };
  attach::Frame hello;
  hello.type = attach::FrameType::kHello;
  if (absl::Status sent = attach::SendFrame(fd, hello); !sent.ok()) return failed(sent);
  absl::StatusOr<attach::Received> answer = attach::ReceiveFrame(fd, deadline);
  if (!answer.ok()) return failed(answer.status());
  if (answer->frame.type == attach::FrameType::kWelcome && answer->more_fds.size() == 2) {
    return answer;
  }
  if (answer->fd >= 0) close(answer->fd);
  for (int extra : answer->more_fds) close(extra);
  switch (answer->frame.type) {
    case attach::FrameType::kWelcome:
      return absl::FailedPreconditionError(
          "attach handshake: cclod's WELCOME carried no command and completion rings; it is "
          "older than this libcclo");
    case attach::FrameType::kRefused: {
      // The id is the daemon's status code: PERMISSION_DENIED for a caller of no tenant,
      // RESOURCE_EXHAUSTED for a full sessions quota.
      const uint64_t code = answer->frame.id;
      return absl::Status(code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code)
                                                 : absl::StatusCode::kPermissionDenied,
                          absl::StrCat("cclod refused the attach: ", answer->frame.text));
    }
    default:
      return absl::InternalError(absl::StrCat("attach handshake: expected WELCOME, got frame type ",
                                              static_cast<int>(answer->frame.type)));
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<Session>> Session::Open(const std::string& runtime_dir,
                                                       absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("attach timeout ", absl::FormatDuration(timeout), " is not positive"));
  }
  if (absl::Status attachable = ClientRing::NoForkSinceAttach(); !attachable.ok()) {
    return attachable;
  }
  const hw::SteadyTime deadline = hw::SteadyNow() + timeout;
  const std::string attach_path = absl::StrCat(runtime_dir, "/attach.sock");
  absl::StatusOr<int> fd = ConnectUnix(attach_path, deadline);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<attach::Received> welcome = Handshake(*fd, attach_path, deadline);
  if (!welcome.ok()) {
    close(*fd);
    return welcome.status();
  }
  const std::string target = absl::StrCat("unix:", runtime_dir, "/client.sock");
  ClientRing::CountForks();
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  std::shared_ptr<Session> session(
      new Session(attach_path, *fd, welcome->frame.id, welcome->frame.text, timeout, channel));
  // Connects in steps: a daemon that ended the session meanwhile (it stopped) fails the
  // attach at once, not at its deadline.
  while (!channel->WaitForConnected(
      hw::ToWallDeadline(std::min(deadline, hw::SteadyNow() + ClientRing::kAliveCheck)))) {
    const absl::Status alive = session->Alive();
    if (alive.ok() && hw::SteadyNow() < deadline) continue;
    close(welcome->fd);
    for (int extra : welcome->more_fds) close(extra);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", target,
                     alive.ok() ? absl::StrCat(" within ", absl::FormatDuration(timeout))
                                : absl::StrCat(": ", alive.message())));
  }
  // The ring's liveness check holds the session weakly: the ring lives inside it.
  absl::StatusOr<std::unique_ptr<ClientRing>> ring = ClientRing::Map(
      welcome->fd, welcome->frame.bytes, welcome->more_fds[0], welcome->more_fds[1],
      [weak = std::weak_ptr<Session>(session)] {
        std::shared_ptr<Session> alive = weak.lock();
        return alive ? alive->Alive() : absl::UnavailableError("the session is closed");
      });
  if (!ring.ok()) return ring.status();
  session->ring_ = *std::move(ring);
  static std::once_flag fork_handlers;
  std::call_once(fork_handlers, [] {
    pthread_atfork([] { open_sessions_mutex.lock(); }, [] { open_sessions_mutex.unlock(); },
                   [] {
                     for (Session* open : OpenSessions()) open->DropAttachSocketCopy();
                     OpenSessions().clear();  // the parent's, not this child's to drop again
                     open_sessions_mutex.unlock();
                   });
  });
  std::lock_guard<std::mutex> lock(open_sessions_mutex);
  OpenSessions().insert(session.get());
  return session;
}

absl::Status Session::Alive(absl::Duration wait) {
  // Never waits behind a reader of the attach socket: that reader would see it closed.
  if (!attach_mutex_.TryLock()) return absl::OkStatus();
  absl::Status alive;
  if (attach_fd_ < 0) {
    alive = absl::FailedPreconditionError("the session is closed");
  } else {
    pollfd attach{attach_fd_, POLLRDHUP, 0};
    const timespec timeout = absl::ToTimespec(wait);
    if (ppoll(&attach, 1, &timeout, nullptr) > 0 &&
        (attach.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      alive = absl::UnavailableError(
          absl::StrCat("cclod ended the session (attach socket ", attach_path_, " closed)"));
    }
  }
  attach_mutex_.Unlock();
  return alive;
}

Session::Session(std::string attach_path, int attach_fd, uint64_t id, std::string token,
                 absl::Duration rpc_timeout, std::shared_ptr<grpc::Channel> channel)
    : attach_path_(std::move(attach_path)),
      id_(id),
      token_(std::move(token)),
      rpc_timeout_(rpc_timeout),
      channel_(channel.get()),
      stub_(v1::Client::NewStub(std::move(channel))),
      attach_fd_(attach_fd) {}

Session::~Session() {
  {
    std::lock_guard<std::mutex> lock(open_sessions_mutex);
    OpenSessions().erase(this);
  }
  Close();
  // gRPC's objects are not destroyed in a forked child: their threads stayed in the parent,
  // and destroying the channel there waits for them forever.
  if (Forked()) (void)stub_.release();
}

void Session::DropAttachSocketCopy() {
  // Cleared before it is closed: a thread of the parent that closed it and then got the
  // same number for another file, both before the fork, must not lose that file here.
  if (const int fd = std::exchange(attach_fd_, -1); fd >= 0) close(fd);
}

void Session::CloseFds() {
  DropAttachSocketCopy();
  for (auto& [id, unclaimed] : unclaimed_) close(unclaimed.received.fd);
  unclaimed_.clear();
}

void Session::Close() {
  if (ring_ != nullptr) ring_->Close();
  if (Forked()) return CloseFds();  // one thread there; the lock may be held since the fork
  absl::MutexLock lock(&attach_mutex_);
  CloseFds();
}

void Session::Prepare(grpc::ClientContext& context, absl::Duration timeout) const {
  context.AddMetadata(kSessionMetadata, token_);
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

uint64_t Session::BeginAllocation() {
  absl::MutexLock lock(&attach_mutex_);
  allocations_.insert(next_allocation_);
  return next_allocation_++;
}

std::vector<uint64_t> Session::EndAllocation(uint64_t allocation) {
  absl::MutexLock lock(&attach_mutex_);
  allocations_.erase(allocation);
  const uint64_t oldest = allocations_.empty() ? next_allocation_ : *allocations_.begin();
  std::vector<uint64_t> orphans;
  for (auto it = unclaimed_.begin(); it != unclaimed_.end();) {
    if (it->second.claimable_below > oldest) {
      ++it;
    } else {
      close(it->second.received.fd);
      orphans.push_back(it->first);
      it = unclaimed_.erase(it);
    }
  }
  return orphans;
}

absl::StatusOr<attach::Received> Session::TakeBuffer(uint64_t buffer_id, hw::SteadyTime deadline) {
  absl::MutexLock lock(&attach_mutex_);
  while (true) {
    if (auto it = unclaimed_.find(buffer_id); it != unclaimed_.end()) {
      attach::Received received = it->second.received;
      unclaimed_.erase(it);
      return received;
    }
    if (attach_fd_ < 0) return absl::FailedPreconditionError("the session is closed");
    absl::StatusOr<attach::Received> received = attach::ReceiveFrame(attach_fd_, deadline);
    if (!received.ok()) {
      return absl::Status(received.status().code(),
                          absl::StrCat("waiting for the fd of buffer ", buffer_id, ": ",
                                       received.status().message()));
    }
    for (int extra : received->more_fds) close(extra);  // a BUFFER frame carries one fd
    if (received->frame.type != attach::FrameType::kBuffer || received->fd < 0) {
      if (received->fd >= 0) close(received->fd);
      return absl::InternalError(absl::StrCat(
          "waiting for the fd of buffer ", buffer_id, ": got frame type ",
          static_cast<int>(received->frame.type), received->fd < 0 ? " without an fd" : ""));
    }
    if (!unclaimed_.try_emplace(received->frame.id, Unclaimed{*received, next_allocation_})
             .second) {
      close(received->fd);  // a repeated frame for a buffer already waiting to be claimed
    }
  }
}

absl::Status Session::FromGrpc(const grpc::Status& status, const std::string& rpc) {
  if (status.ok()) return absl::OkStatus();
  // libcclo cancels none of its calls: a CANCELLED one is gRPC's answer to a call that
  // reached client.sock as the daemon stopped (its bare "CANCELLED").
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
      status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::CANCELLED) {
    // A channel that is not READY after the call lost its connection to the daemon, not an
    // answer from it.
    const bool connection_lost = status.error_code() == grpc::StatusCode::UNAVAILABLE &&
                                 channel_->GetState(false) != GRPC_CHANNEL_READY;
    if (absl::Status alive = Alive(connection_lost ? kHangupGrace : absl::ZeroDuration());
        !alive.ok()) {
      return absl::Status(alive.code(), absl::StrCat(rpc, ": ", alive.message(), "; attach again (",
                                                     status.error_message(), ")"));
    }
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(rpc, ": ", status.error_message()));
}

absl::StatusOr<uint32_t> TimeoutMillis(absl::Duration timeout, const std::string& what) {
  if (timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " timeout ", absl::FormatDuration(timeout), " is negative"));
  }
  if (timeout == absl::ZeroDuration()) return 0;
  const int64_t millis = absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)));
  return static_cast<uint32_t>(std::min<int64_t>(millis, UINT32_MAX));
}

}  // namespace cclo::client
