// cclo-run's command line: `token` and `run` (see driver.h for what they do).
#pragma once

#include <ostream>

namespace cclo::run {

/// Runs cclo-run with `argv`, printing results to `out` and errors to `err`. Returns the exit
/// code: 0 when everything passed, 1 when the daemon failed or a check found a mismatch,
/// 2 for a bad command line.
int Main(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace cclo::run
