// The json log format: the fields of a line, and messages of any bytes as valid JSON.
#include "daemon/log_format.h"

#include <gtest/gtest.h>

#include <sstream>

#include "absl/time/time.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/daemon/json_line.h"

namespace cclo::daemon {
namespace {

/// One line of `message` at `level` and `time`, as JsonLogFormatter writes it.
std::string Format(std::string_view message, spdlog::level::level_enum level = spdlog::level::info,
                   absl::Time time = absl::Now()) {
  spdlog::details::log_msg msg(absl::ToChronoTime(time), spdlog::source_loc{}, "", level,
                               spdlog::string_view_t(message.data(), message.size()));
  spdlog::memory_buf_t out;
  JsonLogFormatter().format(msg, out);
  return fmt::to_string(out);
}

/// The message field of a formatted line, which must be one JSON object and end the line.
std::string LoggedMessage(const std::string& line) {
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  absl::StatusOr<google::protobuf::Struct> parsed =
      testing::ParseJsonLine(line.substr(0, line.size() - 1));
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? parsed->fields().at("message").string_value() : "";
}

TEST(JsonLogFormatterTest, WritesTimeInUtcLevelAndMessage) {
  const absl::Time time = absl::FromUnixMicros(1795835045123456);  // 2026-11-28 03:04:05.123456
  EXPECT_EQ(Format("cclod ready", spdlog::level::warn, time),
            "{\"time\":\"2026-11-28T03:04:05.123456Z\",\"level\":\"warn\","
            "\"message\":\"cclod ready\"}\n");
  EXPECT_EQ(Format("x", spdlog::level::err, absl::FromUnixSeconds(0)),
            "{\"time\":\"1970-01-01T00:00:00.000000Z\",\"level\":\"error\",\"message\":\"x\"}\n");
}

TEST(JsonLogFormatterTest, EscapesQuotesBackslashesAndControlCharacters) {
  const std::string message = "say \"hi\" C:\\dir\nnext line\r\t\x01\x1b[2J\x7f end";
  const std::string line = Format(message);
  EXPECT_NE(line.find(R"(say \"hi\" C:\\dir\nnext line\u000d\u0009\u0001\u001b[2J\u007f end)"),
            std::string::npos)
      << line;
  EXPECT_EQ(LoggedMessage(line), message);
  EXPECT_EQ(LoggedMessage(Format(std::string("nul \0 inside", 13))),
            std::string("nul \0 inside", 13));
}

TEST(JsonLogFormatterTest, KeepsUtf8AndReplacesBytesThatAreNotUtf8) {
  const std::string utf8 = "gr\xc3\xbc\xc3\x9f\x65 \xe2\x9c\x93 \xf0\x9d\x84\x9e";
  EXPECT_EQ(LoggedMessage(Format(utf8)), utf8);
  const std::string replacement = "\xef\xbf\xbd";
  struct Case {
    std::string bytes;
    std::string logged;
  };
  for (const Case& bad : {
           Case{"a\xff"
                "b",
                "a" + replacement + "b"},
           Case{"cut \xe2\x9c", "cut " + replacement + replacement},       // a sequence cut short
           Case{"\xc0\xaf", replacement + replacement},                    // overlong '/'
           Case{"\xed\xa0\x80", replacement + replacement + replacement},  // a surrogate
           Case{"\xf4\x90\x80\x80", replacement + replacement + replacement + replacement},
           Case{"\x80 lone", replacement + " lone"},  // a continuation byte alone
       }) {
    EXPECT_EQ(LoggedMessage(Format(bad.bytes)), bad.logged) << bad.bytes;
  }
}

TEST(SetLogFormatTest, SwitchesEveryLoggerBetweenJsonAndPlain) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_st>(out));
  spdlog::register_logger(logger);
  SetLogFormat("json");
  logger->info("as json");
  EXPECT_EQ(LoggedMessage(out.str()), "as json");
  out.str("");
  SetLogFormat("plain");
  logger->info("as plain");
  EXPECT_NE(out.str().find("] [test] [info] as plain\n"), std::string::npos) << out.str();
  spdlog::drop("test");
}

}  // namespace
}  // namespace cclo::daemon
