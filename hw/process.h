// What the kernel says of a process (/proc): the figures of Prometheus's standard process
// metrics, which cclod exports about itself and cclo-bench reads of the daemons it times.
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
  double start_time_seconds = 0;  ///< since the Unix epoch
};

/// `pid`'s figures from /proc/<pid>/stat (and the boot time from /proc/stat); NOT_FOUND if
/// the process is gone.
absl::StatusOr<ProcessStat> ReadProcessStat(pid_t pid);

/// How many descriptors this process holds open, and its soft limit on them.
struct Descriptors {
  uint64_t open = 0;
  uint64_t limit = 0;
};
absl::StatusOr<Descriptors> OwnDescriptors();

}  // namespace cclo::hw
