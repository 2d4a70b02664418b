#include "client/cli.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hw/types.h"

namespace cclo::client {

CLI::Validator Decimal(uint64_t largest) {
  return CLI::Validator(
      [largest](std::string& text) -> std::string {
        const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
          return absl::ascii_isdigit(static_cast<unsigned char>(c));
        });
        if (!digits || (text.size() > 1 && text[0] == '0')) {
          return absl::StrCat(text, " is not a decimal whole number (0, 1, 2, ...)");
        }
        uint64_t value = 0;
        if (absl::SimpleAtoi(text, &value) && value <= largest) return "";
        return absl::StrCat(text, " is too large (at most ", largest, ")");
      },
      "DECIMAL");
}

CLI::Validator RuntimeDir() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (!text.empty()) return "";
        return "is empty; give the dir of cclod's sockets (as /run/cclod)";
      },
      "DIR");
}

CLI::Validator Utf8() {
  return CLI::Validator(
      [](std::string& text) { return std::string(hw::CheckUtf8(text).message()); }, "UTF-8");
}

CLI::Validator Seconds(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        // Digits with at most one point: strtod would also take " 5", "0x10" and "1e3".
        auto digit = [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); };
        const bool decimal =
            std::ranges::any_of(text, digit) && std::ranges::count(text, '.') <= 1 &&
            std::ranges::all_of(text, [&](char c) { return digit(c) || c == '.'; });
        const double seconds = decimal ? std::strtod(text.c_str(), nullptr) : 0;
        if (decimal && seconds >= min && seconds <= max) return "";
        return absl::StrCat(text, " is not a number of seconds in [", min, ", ", max, "]");
      },
      absl::StrCat("SECONDS in [", min, ", ", max, "]"));
}

int CommandRequired(CLI::App& command, std::ostream& err) {
  std::vector<std::string> path;
  for (const CLI::App* at = &command; at != nullptr; at = at->get_parent()) {
    path.insert(path.begin(), at->get_name());
  }
  std::vector<std::string> names;
  for (const CLI::App* sub : command.get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  err << absl::StrJoin(path, " ") << ": a command is required: one of "
      << absl::StrJoin(names, ", ") << "\nRun with --help for more information.\n";
  return kUsageExitCode;
}

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
