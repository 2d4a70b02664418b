// ccloctl's command line: global options, the commands and what each prints.
#pragma once

#include <ostream>

namespace cclo::ccloctl {

/// Runs ccloctl with `argv`, printing results to `out` and errors to `err`. Returns the exit
/// code: 0 on success, 1 when the daemon could not be reached or answered with an error,
/// 2 for a bad command line.
int Main(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace cclo::ccloctl
