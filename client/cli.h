// Command-line parsing shared by ccloctl and cclo-run: CLI11 with uniform exit codes.
#pragma once

#include <optional>
#include <ostream>

#include "CLI/CLI.hpp"

namespace cclo::client {

/// Exit code for a command line that could not be parsed.
inline constexpr int kUsageExitCode = 2;

/// Parses argv into `app`. Returns nothing when the program should go on; otherwise the code
/// to exit with: 0 after printing the help asked for to `out`, kUsageExitCode after printing
/// the parse error (which option, which value) and a pointer to --help to `err`.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv,
                                    std::ostream& out, std::ostream& err);

}  // namespace cclo::client
