// log_format: json on a real daemon: every line it writes, its own and gRPC's and
// protobuf's, from start to stop, is one JSON object.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "tests/daemon/json_line.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

TEST(LogFormatTest, JsonDaemonWritesOnlyJsonObjects) {
  Daemon daemon("log_format: json\n");
  {
    RawSession session(daemon.runtime_dir());
    uint64_t handle = 0;
    grpc::Status joined = session.Join(session.NewToken(), 0, 1, &handle);
    ASSERT_TRUE(joined.ok()) << joined.error_message();
    grpc::Status ran = session.Run(AllreduceRequest(handle, session.Alloc(4096), 1024));
    EXPECT_TRUE(ran.ok()) << ran.error_message();
  }
  // A join whose address has a quote, a newline and bytes that are not UTF-8, which
  // protobuf refuses to parse (and logs), and one it parses, which the daemon refuses.
  EXPECT_FALSE(ForeignPeerJoin(daemon.peer_address(), "10.0.0.9:1\xff\xfe").ok());
  EXPECT_EQ(ForeignPeerJoin(daemon.peer_address(), "\"10.0.0.9:1\"\n[warning] x").error_code(),
            grpc::StatusCode::NOT_FOUND);
  daemon.process().Signal(SIGTERM);
  const ProcessResult stopped = daemon.process().Wait(absl::Seconds(20));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;

  ASSERT_FALSE(stopped.output.empty());
  EXPECT_EQ(stopped.output.back(), '\n');
  const std::regex utc_time(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)");
  const std::set<std::string> levels = {"trace", "debug", "info", "warn", "error", "critical"};
  std::vector<std::string> messages;
  const std::vector<std::string> lines = absl::StrSplit(stopped.output, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    absl::StatusOr<google::protobuf::Struct> parsed = ParseJsonLine(line);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const auto& fields = parsed->fields();
    EXPECT_TRUE(std::regex_match(fields.at("time").string_value(), utc_time)) << line;
    EXPECT_TRUE(levels.count(fields.at("level").string_value())) << line;
    messages.push_back(fields.at("message").string_value());
  }
  auto logged = [&messages](const std::string& text) {
    for (const std::string& message : messages) {
      if (message.find(text) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(logged("ready: peer ")) << stopped.output;
  EXPECT_TRUE(logged("attached: pid ")) << stopped.output;
  EXPECT_TRUE(logged("protobuf: ")) << stopped.output;
  EXPECT_TRUE(logged("from peer daemon \"10.0.0.9:1\"\\n[warning] x (")) << stopped.output;
  EXPECT_TRUE(logged("cclod stopped")) << stopped.output;
}

}  // namespace
}  // namespace cclo::testing
