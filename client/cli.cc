#include "client/cli.h"

namespace cclo::client {

std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv,
                                    std::ostream& out, std::ostream& err) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error, out, err);
    return code == static_cast<int>(CLI::ExitCodes::Success) ? 0 : kUsageExitCode;
  }
  return std::nullopt;
}

}  // namespace cclo::client
