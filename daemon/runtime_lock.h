// A runtime dir belongs to one cclod at a time. The daemon holds an exclusive lock on
// <runtime_dir>/cclod.lock for its whole life (the kernel lets go of it when the process
// ends, however it ends), so a second daemon started on the same dir refuses to start
// instead of taking over the first one's sockets and removing them when it stops.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cclo::daemon {

class RuntimeLock {
 public:
  /// Locks `runtime_dir` (which must exist) for this process, writing its pid into the
  /// lock file. CheckDir's error when the dir is not one cclod may use; FAILED_PRECONDITION
  /// naming the holder's pid when another process has it; UNAVAILABLE when the file cannot
  /// be opened or locked.
  static absl::StatusOr<RuntimeLock> Take(const std::string& runtime_dir);
  /// What Take checks of `runtime_dir` first: INVALID_ARGUMENT when it is not a directory (a
  /// link is not) of this process's effective uid that neither group nor others may write,
  /// or when a dir above it is another user's than root's, or one that group or others may
  /// write without the sticky bit; UNAVAILABLE when it cannot be examined. Of a missing
  /// `runtime_dir` (a start makes it), the dirs above it that exist.
  static absl::Status CheckDir(const std::string& runtime_dir);

  RuntimeLock(RuntimeLock&& other) noexcept;
  RuntimeLock& operator=(RuntimeLock&&) = delete;
  ~RuntimeLock();

 private:
  explicit RuntimeLock(int fd) : fd_(fd) {}

  int fd_;
};

}  // namespace cclo::daemon
