#include "daemon/unix_listener.h"

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::StatusOr<int> ListenUnix(const std::string& what, const std::string& path, mode_t mode) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path '", path, "' is longer than ",
                                                   sizeof(address.sun_path) - 1, " bytes"));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno(what);
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      chmod(path.c_str(), mode) != 0 || listen(fd, 128) != 0) {
    absl::Status status = Errno(absl::StrCat(what, " ", path));
    close(fd);
    return status;
  }
  return fd;
}

absl::StatusOr<std::unique_ptr<GrpcUnixListener>> GrpcUnixListener::Start(
    const std::string& path, mode_t mode, grpc::Server* server, std::function<void()> on_pause) {
  absl::StatusOr<int> fd = ListenUnix("socket", path, mode);
  if (!fd.ok()) return fd.status();
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    close(*fd);
    unlink(path.c_str());
    return Errno("eventfd");
  }
  std::unique_ptr<GrpcUnixListener> listener(
      new GrpcUnixListener(path, *fd, wake, server, std::move(on_pause)));
  if (absl::Status started =
          hw::StartThread(listener->thread_, path, [&run = *listener] { run.Run(); });
      !started.ok()) {
    return started;
  }
  return listener;
}

GrpcUnixListener::GrpcUnixListener(std::string path, int listen_fd, int wake_fd,
                                   grpc::Server* server, std::function<void()> on_pause)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      server_(server),
      on_pause_(std::move(on_pause)) {}

GrpcUnixListener::~GrpcUnixListener() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  unlink(path_.c_str());
}

void GrpcUnixListener::Run() {
  std::array<pollfd, 2> fds{{{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}}};
  const int backoff_ms = static_cast<int>(absl::ToInt64Milliseconds(hw::kAcceptBackoff));
  for (;;) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}: poll failed: {}; not accepting for {}", path_, std::strerror(errno),
                    absl::FormatDuration(hw::kAcceptBackoff));
      on_pause_();
      if (poll(fds.data(), 1, backoff_ms) > 0) return;  // one entry needs no memory
      continue;
    }
    if (fds[0].revents) return;
    // gRPC takes the descriptor, which its event loop wants non-blocking. By the system call,
    // not accept4(): gRPC closes it in code ThreadSanitizer does not see, which then took the
    // next descriptor of its number that it does not see made (memfd_create) for one used
    // unordered with this accept.
    const int fd = static_cast<int>(
        syscall(SYS_accept4, listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd >= 0) {
      grpc::AddInsecureChannelFromFd(server_, fd);
    } else if (hw::PausesAccepting(errno)) {
      spdlog::warn("{}: accept failed: {}; not accepting for {}", path_, std::strerror(errno),
                   absl::FormatDuration(hw::kAcceptBackoff));
      on_pause_();
      if (poll(fds.data(), 1, backoff_ms) > 0) return;
    }
  }
}

}  // namespace cclo::daemon
