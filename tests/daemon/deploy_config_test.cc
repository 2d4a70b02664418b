// The shipped default config parses and equals the built-in defaults it documents, and
// its commented policy example is a valid policy.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/config.h"
#include "hw/types.h"

namespace cclo::daemon {
namespace {

std::string ShippedPath() {
  const char* root = std::getenv("TEST_SRCDIR");
  return std::string(root ? root : ".") + "/cclod/deploy/cclod.yaml";
}

/// The keys ParseConfig takes, as its error for an unknown key lists them.
std::vector<std::string> ConfigKeys() {
  const absl::StatusOr<Config> refused = ParseConfig("no_such_key: 0");
  const std::string message(refused.status().message());
  const std::string list = "; valid keys: ";
  return absl::StrSplit(message.substr(message.find(list) + list.size()), ", ");
}

/// Expects the field of a key equal in the shipped config and the defaults.
using SameField = std::function<void(const Config& shipped, const Config& defaults)>;

template <typename T>
SameField Same(T Config::*field) {
  return [field](const Config& shipped, const Config& defaults) {
    EXPECT_EQ(shipped.*field, defaults.*field);
  };
}

// Every key the parser takes has a built-in default; the shipped config states each (the
// TLS files commented out) and equals the defaults in every one. The tenants compare whole,
// every quota included.
TEST(DeployConfigTest, ShippedConfigEqualsDefaults) {
  absl::StatusOr<Config> shipped = LoadConfig(ShippedPath());
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  const Config defaults;
  const std::map<std::string, SameField> fields = {
      {"runtime_dir", Same(&Config::runtime_dir)},
      {"host", Same(&Config::host)},
      {"peer_port", Same(&Config::peer_port)},
      {"data_port", Same(&Config::data_port)},
      {"metrics_host", Same(&Config::metrics_host)},
      {"metrics_port", Same(&Config::metrics_port)},
      {"rx_pool_bytes", Same(&Config::rx_pool_bytes)},
      {"scratch_max_bytes", Same(&Config::scratch_max_bytes)},
      {"segment_bytes", Same(&Config::segment_bytes)},
      {"eager_max_bytes", Same(&Config::eager_max_bytes)},
      {"credits_per_peer", Same(&Config::credits_per_peer)},
      {"rendezvous_waiting_per_peer", Same(&Config::rendezvous_waiting_per_peer)},
      {"peer_timeout_ms", Same(&Config::peer_timeout)},
      {"data_link_gbps", Same(&Config::data_link_gbps)},
      {"data_tcp_congestion", Same(&Config::data_tcp_congestion)},
      {"max_buffer_bytes", Same(&Config::max_buffer_bytes)},
      {"op_deadline_ms", Same(&Config::op_deadline)},
      {"join_timeout_ms", Same(&Config::join_timeout)},
      {"log_level", Same(&Config::log_level)},
      {"log_format", Same(&Config::log_format)},
      {"admin_group", Same(&Config::admin_group)},
      {"tenants", Same(&Config::tenants)},
      {"default_tenant", Same(&Config::default_tenant)},
      {"scheduler", Same(&Config::scheduler)},
      {"peer_tls_cert_file", Same(&Config::peer_tls_cert_file)},
      {"peer_tls_key_file", Same(&Config::peer_tls_key_file)},
      {"peer_tls_ca_file", Same(&Config::peer_tls_ca_file)},
      {"policy",
       [](const Config& shipped, const Config& defaults) {
         EXPECT_EQ(shipped.policy.DebugString(), defaults.policy.DebugString());
       }},
  };
  absl::StatusOr<std::string> text = hw::ReadTextFile("config file", ShippedPath());
  ASSERT_TRUE(text.ok()) << text.status();
  const std::vector<std::string> keys = ConfigKeys();
  EXPECT_EQ(keys.size(), fields.size());
  for (const std::string& key : keys) {
    SCOPED_TRACE(key);
    EXPECT_TRUE(absl::StrContains(*text, "\n" + key + ":") ||
                absl::StrContains(*text, "\n# " + key + ":"));
    auto field = fields.find(key);
    ASSERT_NE(field, fields.end()) << "a key this test does not compare";
    field->second(*shipped, defaults);
  }
}

TEST(DeployConfigTest, PolicyExampleIsValid) {
  std::ifstream file(ShippedPath());
  std::string line, example;
  bool in_example = false;
  while (std::getline(file, line)) {
    if (line == "#   policy:") in_example = true;
    if (in_example && line.rfind("#  ", 0) != 0) break;
    if (in_example) example += line.substr(2) + "\n";
  }
  ASSERT_FALSE(example.empty());
  absl::StatusOr<Config> config = ParseConfig(example);
  ASSERT_TRUE(config.ok()) << config.status() << "\n" << example;
  EXPECT_EQ(config->policy.rules_size(), 2);
}

/// The comment lines right above `key:` in the shipped config.
std::string CommentAbove(const std::string& key) {
  std::ifstream file(ShippedPath());
  std::string line, comment;
  while (std::getline(file, line)) {
    if (line.rfind(key + ":", 0) == 0) return comment;
    comment = line.rfind("#", 0) == 0 ? comment + line + "\n" : "";
  }
  return "";
}

TEST(DeployConfigTest, NumericKeysStateTheRangeTheParserTakes) {
  // These four keys said no range, and the tenants' quotas none either.
  const struct {
    std::string key;
    std::string range;
    std::string max;
    std::string over;
  } keys[] = {
      {"rx_pool_bytes", "65536 to 68719476736", "68719476736", "68719476737"},
      {"max_buffer_bytes", "4096 to 1099511627776", "1099511627776", "1099511627777"},
      {"op_deadline_ms", "1 to 86400000", "86400000", "86400001"},
      {"join_timeout_ms", "1 to 86400000", "86400000", "86400001"},
  };
  for (const auto& [key, range, max, over] : keys) {
    EXPECT_NE(CommentAbove(key).find(range), std::string::npos) << key << ":\n"
                                                                << CommentAbove(key);
    EXPECT_TRUE(ParseConfig(key + ": " + max).ok()) << key;
    EXPECT_FALSE(ParseConfig(key + ": " + over).ok()) << key;
  }
  EXPECT_NE(CommentAbove("tenants").find("buffer_bytes and scratch_bytes 0 to 2^48, the\n#  "
                                         "          others 0 to 1048576"),
            std::string::npos)
      << CommentAbove("tenants");
  for (const char* quota : {"buffer_bytes", "scratch_bytes"}) {
    EXPECT_TRUE(ParseConfig(absl::StrCat("tenants: [{name: a, quotas: {", quota,
                                         ": 281474976710656}}]\n"
                                         "default_tenant: a"))
                    .ok())
        << quota;
    EXPECT_FALSE(ParseConfig(absl::StrCat("tenants: [{name: a, quotas: {", quota,
                                          ": 281474976710657}}]\n"
                                          "default_tenant: a"))
                     .ok())
        << quota;
  }
  for (const char* quota :
       {"communicators", "inflight_ops", "sessions", "buffers", "waiting_calls"}) {
    EXPECT_TRUE(ParseConfig(absl::StrCat("tenants: [{name: a, quotas: {", quota,
                                         ": 1048576}}]\ndefault_tenant: a"))
                    .ok())
        << quota;
    EXPECT_FALSE(ParseConfig(absl::StrCat("tenants: [{name: a, quotas: {", quota,
                                          ": 1048577}}]\ndefault_tenant: a"))
                     .ok())
        << quota;
  }
}

}  // namespace
}  // namespace cclo::daemon
