#include "daemon/log_format.h"

#include <algorithm>
#include <string_view>

#include "absl/time/time.h"
#include "daemon/config.h"
#include "hw/types.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

void Append(std::string_view text, spdlog::memory_buf_t& out) {
  out.append(text.data(), text.data() + text.size());
}

/// Appends `text` as a JSON string, quotes included.
void AppendJsonString(std::string_view text, spdlog::memory_buf_t& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x80) {
      const size_t length = hw::Utf8Length(text.substr(i));
      Append(length == 0 ? "\\ufffd" : text.substr(i, length), out);
      i += std::max<size_t>(length, 1);
      continue;
    }
    if (byte == '"' || byte == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(byte));
    } else if (byte == '\n') {
      Append("\\n", out);
    } else if (byte < 0x20 || byte == 0x7f) {
      const char escaped[] = {'\\', 'u', '0', '0', kHex[byte >> 4], kHex[byte & 0xf]};
      out.append(escaped, escaped + sizeof(escaped));
    } else {
      out.push_back(static_cast<char>(byte));
    }
    ++i;
  }
  out.push_back('"');
}

}  // namespace

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const std::string time =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromChrono(msg.time), absl::UTCTimeZone());
  Append("{\"time\":\"" + time + "\",\"level\":\"" + LogLevelName(msg.level) + "\",\"message\":",
         dest);
  AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), dest);
  Append("}\n", dest);
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

void SetLogFormat(const std::string& name) {
  if (name == "json") {
    spdlog::set_formatter(std::make_unique<JsonLogFormatter>());
  } else {
    spdlog::set_formatter(std::make_unique<spdlog::pattern_formatter>());
  }
}

}  // namespace cclo::daemon
