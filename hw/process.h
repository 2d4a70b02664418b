// What the kernel says of a process (/proc): the figures of Prometheus's standard process
// metrics, which cclod exports about itself, and which cclo-bench and the tests read of the
// daemons they run.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace cclo::hw {

struct ProcessStat {
  double cpu_seconds = 0;  ///< user plus system, all threads
  uint64_t threads = 0;
  uint64_t virtual_bytes = 0;
  uint64_t resident_bytes = 0;
  uint64_t start_ticks = 0;  ///< when it started, in clock ticks after the boot
};

/// `pid`'s figures from /proc/<pid>/stat; NOT_FOUND with the reason if it cannot be read
/// (the process is gone, say).
absl::StatusOr<ProcessStat> ReadProcessStat(pid_t pid);

/// When a process started `start_ticks` after the boot, in seconds since the Unix epoch.
/// The boot time (/proc/stat's btime, which some kernels compute anew at each read, a
/// second apart) is read until a read succeeds, then kept.
absl::StatusOr<double> StartTimeSeconds(uint64_t start_ticks);

/// How many descriptors `pid` holds open: the kernel's count, the size of /proc/<pid>/fd
/// (Linux 6.2 and later), which takes no descriptor to read, else ListedDescriptors.
absl::StatusOr<uint64_t> OpenDescriptors(pid_t pid);

/// The entries of /proc/<pid>/fd, less the listing's own where `pid` is this process;
/// RESOURCE_EXHAUSTED where this process has no descriptor left for the listing (EMFILE:
/// all it may have are open), NOT_FOUND with the reason for any other failure.
absl::StatusOr<uint64_t> ListedDescriptors(pid_t pid);

}  // namespace cclo::hw
