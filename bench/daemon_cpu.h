// The CPU time a daemon has used, for cclo-bench's CPU seconds per GiB moved.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace cclo::bench {

/// The pid of the cclod serving `runtime_dir`: the peer of a connection to its attach
/// socket (SO_PEERCRED).
absl::StatusOr<pid_t> DaemonPid(const std::string& runtime_dir);

/// User plus system CPU seconds `pid` has used so far (/proc/<pid>/stat, all threads).
absl::StatusOr<double> CpuSeconds(pid_t pid);

}  // namespace cclo::bench
