// The shipped default config parses and equals the built-in defaults it documents, and
// its commented policy example is a valid policy.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon/config.h"

namespace cclo::daemon {
namespace {

std::string ShippedPath() {
  const char* root = std::getenv("TEST_SRCDIR");
  return std::string(root ? root : ".") + "/cclod/deploy/cclod.yaml";
}

TEST(DeployConfigTest, ShippedConfigEqualsDefaults) {
  absl::StatusOr<Config> shipped = LoadConfig(ShippedPath());
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  Config defaults;
  EXPECT_EQ(shipped->runtime_dir, defaults.runtime_dir);
  EXPECT_EQ(shipped->host, defaults.host);
  EXPECT_EQ(shipped->peer_port, defaults.peer_port);
  EXPECT_EQ(shipped->data_port, defaults.data_port);
  EXPECT_EQ(shipped->metrics_host, defaults.metrics_host);
  EXPECT_EQ(shipped->metrics_port, defaults.metrics_port);
  EXPECT_EQ(shipped->rx_pool_bytes, defaults.rx_pool_bytes);
  EXPECT_EQ(shipped->scratch_max_bytes, defaults.scratch_max_bytes);
  EXPECT_EQ(shipped->segment_bytes, defaults.segment_bytes);
  EXPECT_EQ(shipped->eager_max_bytes, defaults.eager_max_bytes);
  EXPECT_EQ(shipped->credits_per_peer, defaults.credits_per_peer);
  EXPECT_EQ(shipped->data_link_gbps, defaults.data_link_gbps);
  EXPECT_EQ(shipped->data_tcp_congestion, defaults.data_tcp_congestion);
  EXPECT_EQ(shipped->max_buffer_bytes, defaults.max_buffer_bytes);
  EXPECT_EQ(shipped->op_deadline, defaults.op_deadline);
  EXPECT_EQ(shipped->join_timeout, defaults.join_timeout);
  EXPECT_EQ(shipped->log_level, defaults.log_level);
  EXPECT_EQ(shipped->log_format, defaults.log_format);
  EXPECT_EQ(shipped->admin_group, defaults.admin_group);
  EXPECT_EQ(shipped->default_tenant, defaults.default_tenant);
  EXPECT_EQ(shipped->scheduler, defaults.scheduler);
  ASSERT_EQ(shipped->tenants.size(), defaults.tenants.size());
  const TenantConfig& tenant = shipped->tenants[0];
  const TenantConfig& expected = defaults.tenants[0];
  EXPECT_EQ(tenant.name, expected.name);
  EXPECT_EQ(tenant.uids, expected.uids);
  EXPECT_EQ(tenant.users, expected.users);
  EXPECT_EQ(tenant.groups, expected.groups);
  EXPECT_EQ(tenant.weight, expected.weight);
  EXPECT_EQ(tenant.quotas.buffer_bytes, expected.quotas.buffer_bytes);
  EXPECT_EQ(tenant.quotas.communicators, expected.quotas.communicators);
  EXPECT_EQ(tenant.quotas.inflight_ops, expected.quotas.inflight_ops);
  EXPECT_EQ(tenant.quotas.sessions, expected.quotas.sessions);
  EXPECT_EQ(tenant.quotas.buffers, expected.quotas.buffers);
  EXPECT_EQ(tenant.quotas.scratch_bytes, expected.quotas.scratch_bytes);
  EXPECT_EQ(shipped->peer_tls_cert_file, defaults.peer_tls_cert_file);
  EXPECT_EQ(shipped->peer_tls_key_file, defaults.peer_tls_key_file);
  EXPECT_EQ(shipped->peer_tls_ca_file, defaults.peer_tls_ca_file);
  EXPECT_EQ(shipped->policy.rules_size(), defaults.policy.rules_size());
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
