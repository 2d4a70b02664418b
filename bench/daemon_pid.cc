#include "bench/daemon_pid.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cclo::bench {

absl::StatusOr<pid_t> DaemonPid(const std::string& runtime_dir) {
  const std::string path = runtime_dir + "/attach.sock";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is too long"));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0;
  const int error = errno;
  close(fd);
  if (!ok) {
    return absl::UnavailableError(
        absl::StrCat("no cclod answers at ", path, ": ", std::strerror(error)));
  }
  return credentials.pid;
}

}  // namespace cclo::bench
