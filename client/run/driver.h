// The two things cclo-run does with a daemon: make a communicator token, and run and check
// ops as one rank of a communicator.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/run/options.h"

namespace cclo::run {

/// Attaches to the daemon in `runtime_dir`, makes a communicator token and prints it on a
/// line of its own to `out`.
absl::Status PrintToken(const std::string& runtime_dir, absl::Duration timeout, std::ostream& out);

/// Runs every op of `options` at every size (rooted ops once per root in `options.roots`;
/// barrier once, at 0 bytes) `options.iters` times as rank `options.rank`: fills the inputs,
/// runs the op (its in-place form with `options.in_place` where it has one), checks this
/// rank's output against the local reference and times it. Every rank must run the same
/// ops, sizes, datatype, roots and in-place choice; only the requested ops are run (no
/// hidden collectives), so `table` may differ between ranks. With `options.table`, rank 0
/// prints `op root bytes time_us GB/s ok` to `out` (root "-" for unrooted ops; ok: rank 0's
/// checks; each rank reports its own through its result). An op that fails ends the run
/// with its error; a wrong result is reported as the first mismatch (rank, op, bytes, root,
/// index, expected, got) as DATA_LOSS after the remaining ops ran, so that all ranks stay
/// in step.
absl::Status RunChecks(const RunOptions& options, absl::Duration attach_timeout, std::ostream& out);

}  // namespace cclo::run
