// The pid of a running daemon, whose CPU time cclo-bench reads for its CPU seconds per GiB
// moved (hw/process.h).
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace cclo::bench {

/// The pid of the cclod serving `runtime_dir`: the peer of a connection to its attach
/// socket (SO_PEERCRED).
absl::StatusOr<pid_t> DaemonPid(const std::string& runtime_dir);

}  // namespace cclo::bench
