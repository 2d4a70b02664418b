// The cclo side of a cclo-bench run: one client process per rank (this binary, re-invoked
// as a worker), their reports gathered.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/options.h"
#include "bench/sweep.h"

namespace cclo::bench {

/// What the ranks reported, per op and size.
struct CcloResults {
  Timings timings;
  std::map<std::pair<Op, uint64_t>, double> cpu_seconds;  ///< all daemons, timed iterations
  std::map<std::pair<Op, uint64_t>, std::string> checks;  ///< "ok" or the first mismatch
};

/// Records a check's verdict ("ok" or the first mismatch) in `kept` unless `kept` already
/// holds a mismatch: the first failure stays.
void KeepCheck(std::string& kept, std::string check);

/// Makes a communicator with the daemon of runtime_dirs[0] as root, runs rank r of it on
/// the daemon of runtime_dirs[r / options.ranks_per_daemon] as `worker_binary worker ...`
/// (every rank at once, killed past options.deadline) and gathers their lines.
/// `daemon_pids` are the daemons whose CPU time rank 0 reads. An error carries the output
/// of the failed ranks.
absl::StatusOr<CcloResults> RunCcloSweep(const BenchOptions& options,
                                         const std::vector<std::string>& runtime_dirs,
                                         const std::vector<pid_t>& daemon_pids,
                                         const std::string& worker_binary);

}  // namespace cclo::bench
