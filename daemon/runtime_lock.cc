#include "daemon/runtime_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cclo::daemon {
namespace {

// The pid the holder wrote into the lock file, or "unknown".
std::string HolderPid(int fd) {
  char text[32] = {};
  const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  const std::string pid = n > 0 ? std::string(absl::StripAsciiWhitespace(text)) : "";
  return pid.empty() ? "unknown" : pid;
}

}  // namespace

absl::StatusOr<RuntimeLock> RuntimeLock::Take(const std::string& runtime_dir) {
  const std::string path = runtime_dir + "/cclod.lock";
  // Only cclod's user may open it: anyone who could would also be able to hold the lock.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  RuntimeLock lock(fd);
  if (fchmod(fd, 0600) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot chmod ", path, ": ", std::strerror(errno)));
  }
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("runtime dir ", runtime_dir, " is in use by another cclod (pid ",
                       HolderPid(fd), "); give each daemon its own runtime_dir"));
    }
    return absl::UnavailableError(absl::StrCat("cannot lock ", path, ": ", std::strerror(errno)));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return lock;
}

RuntimeLock::RuntimeLock(RuntimeLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RuntimeLock::~RuntimeLock() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace cclo::daemon
