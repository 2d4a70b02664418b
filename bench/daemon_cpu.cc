#include "bench/daemon_cpu.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

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

absl::StatusOr<double> CpuSeconds(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  std::ifstream file(path);
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start at field 3, the state;
  // utime and stime are fields 14 and 15.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  std::istringstream fields(stat.substr(name_end + 2));
  std::string skipped;
  for (int field = 3; field < 14; ++field) fields >> skipped;
  unsigned long long user_ticks = 0, system_ticks = 0;
  if (!(fields >> user_ticks >> system_ticks)) {
    return absl::InternalError(absl::StrCat("no utime and stime in ", path));
  }
  return static_cast<double>(user_ticks + system_ticks) / sysconf(_SC_CLK_TCK);
}

}  // namespace cclo::bench
