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

/// Runs every op of `options` with each of its algorithms (AlgorithmsOf), in each datatype,
/// with each root (RootsOf) and at each size (SizesOf), in that nesting, `options.iters`
/// times as rank `options.rank`: fills the inputs, runs the op (its in-place form with
/// `options.in_place` where it has one), checks this rank's output against the local
/// reference and times it. Every rank must run the same ops, algorithms, sizes, datatypes,
/// roots and in-place choice; only the requested ops are run (no hidden collectives), so
/// `table` may differ between ranks. With `options.table`, prints one row per run,
/// `op algorithm datatype root bytes time_us GB/s ok`, to `out` (algorithm "-" for the
/// daemon's choice, root "-" for unrooted ops; ok: this rank's checks). An op that fails
/// ends the run with its error; a wrong result is reported as the first mismatch (rank, op,
/// algorithm if forced, bytes, datatype if several, root, index, expected, got) as
/// DATA_LOSS after the remaining ops ran, so that all ranks stay in step. After the last
/// op the rank leaves the communicator (Communicator::Destroy), which, unlike its client's
/// exit, leaves the ranks on its daemon that still finish the last op undisturbed.
absl::Status RunChecks(const RunOptions& options, absl::Duration attach_timeout, std::ostream& out);

}  // namespace cclo::run
