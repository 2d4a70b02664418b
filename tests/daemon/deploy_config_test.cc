// The shipped default config parses and equals the built-in defaults it documents, and
// its commented policy example is a valid policy.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace cclo::daemon
