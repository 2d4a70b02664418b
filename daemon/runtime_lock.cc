#include "daemon/runtime_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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

absl::Status RuntimeLock::CheckDir(const std::string& runtime_dir) {
  // Whoever may write the dir may replace the sockets with their own (and answer the
  // clients' attaches) or a socket with a link that the chmod after bind follows. One that
  // is missing, with any missing dirs above it, a start makes as cclod's own.
  struct stat dir_stat {};
  const bool exists = lstat(runtime_dir.c_str(), &dir_stat) == 0;
  if (!exists && errno != ENOENT) {
    return absl::UnavailableError(
        absl::StrCat("cannot stat runtime dir ", runtime_dir, ": ", std::strerror(errno)));
  }
  if (exists && (!S_ISDIR(dir_stat.st_mode) || dir_stat.st_uid != geteuid() ||
                 (dir_stat.st_mode & (S_IWGRP | S_IWOTH)) != 0)) {
    const char* kind = S_ISLNK(dir_stat.st_mode)    ? ", a symbolic link"
                       : !S_ISDIR(dir_stat.st_mode) ? ", not a directory"
                                                    : "";
    return absl::InvalidArgumentError(absl::StrFormat(
        "runtime dir %s (owner uid %d, mode %04o%s) must be a directory of cclod's user "
        "(uid %d) that no one else may write: another user could replace its sockets",
        runtime_dir, dir_stat.st_uid, dir_stat.st_mode & 07777, kind, geteuid()));
  }
  // Whoever may write a dir above it may rename it away and put one of theirs in its place,
  // unless that dir has the sticky bit (as /tmp), which keeps others' entries from them. A
  // relative dir is the working dir's, as a start makes it: the walk ends at its root.
  std::error_code error;
  std::filesystem::path resolved = std::filesystem::absolute(runtime_dir, error);
  if (!error) resolved = std::filesystem::weakly_canonical(resolved, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve runtime dir ", runtime_dir, ": ", error.message()));
  }
  for (std::filesystem::path above = resolved.parent_path();; above = above.parent_path()) {
    struct stat above_stat {};
    if (stat(above.c_str(), &above_stat) != 0) {
      if (errno == ENOENT && !exists) continue;
      return absl::UnavailableError(
          absl::StrCat("cannot stat ", above.string(), ": ", std::strerror(errno)));
    }
    const bool others_write =
        (above_stat.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (above_stat.st_mode & S_ISVTX) == 0;
    if ((above_stat.st_uid != 0 && above_stat.st_uid != geteuid()) || others_write) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "runtime dir %s is in %s (owner uid %d, mode %04o), where another user could "
          "replace it: each dir above it must be root's or cclod's user's, and writable by "
          "others only with the sticky bit (as /tmp)",
          runtime_dir, above.string(), above_stat.st_uid, above_stat.st_mode & 07777));
    }
    if (above == above.root_path()) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<RuntimeLock> RuntimeLock::Take(const std::string& runtime_dir) {
  if (absl::Status usable = CheckDir(runtime_dir); !usable.ok()) return usable;
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
