// Command-line parsing shared by ccloctl and cclo-run: CLI11 with uniform exit codes.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>

#include "CLI/CLI.hpp"

namespace cclo::client {

/// Exit code for a command line that could not be parsed.
inline constexpr int kUsageExitCode = 2;

/// Accepts a decimal whole number only: "0", "12", not "010" (CLI11 reads it as octal 8),
/// "0x1f" or "-1" (which CLI11 turns into an unsigned option's largest value), nor one past
/// `largest`, the option type's largest value (give it for a type other than int64_t),
/// which CLI11 would give instead.
CLI::Validator Decimal(uint64_t largest = std::numeric_limits<int64_t>::max());

/// Accepts a runtime dir that is not empty: an empty one (a script's unset variable) named
/// the sockets at the root, "/admin.sock".
CLI::Validator RuntimeDir();

/// Accepts an option or argument that is UTF-8 (hw::CheckUtf8).
CLI::Validator Utf8();

/// Accepts a decimal number of seconds in [min, max] ("2", "0.5"); "nan" and "inf", which
/// CLI11 reads and its own ranges let through, are refused, and so are "0x10", "1e3" and
/// a sign or spaces.
CLI::Validator Seconds(double min, double max);

/// For `command` (an app or one of its subcommands) given without a subcommand: prints
/// "<program> [<command>...]: a command is required: one of <its subcommands>" and a pointer
/// to --help to `err`, and returns kUsageExitCode. Commands that need one leave it optional
/// to CLI11 and call this, so that an unknown word is reported as such instead.
int CommandRequired(CLI::App& command, std::ostream& err);

/// Parses argv into `app`. Returns nothing when the program should go on; otherwise the code
/// to exit with: 0 after printing the help asked for to `out`, kUsageExitCode after printing
/// the parse error (which option, which value) and a pointer to --help to `err`.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv,
                                    std::ostream& out, std::ostream& err);

}  // namespace cclo::client
