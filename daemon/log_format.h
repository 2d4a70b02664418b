// How cclod's log lines look: spdlog's plain lines, or one JSON object a line for log
// collectors (config key log_format).
#pragma once

#include <memory>
#include <string>

#include "spdlog/formatter.h"

namespace cclo::daemon {

/// Writes each line as one JSON object,
/// {"time":"2026-11-28T03:04:05.123456Z","level":"info","message":"..."}: the time in UTC
/// (RFC 3339, microseconds), the level as the config names it, and the message escaped so
/// that any bytes give valid JSON (control characters as \n or \u00XX, bytes that are not
/// UTF-8 as U+FFFD).
class JsonLogFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

/// From now on every logger writes its lines as `name` says: "json" (JsonLogFormatter), or
/// anything else spdlog's default plain pattern. The config checks the name.
void SetLogFormat(const std::string& name);

}  // namespace cclo::daemon
