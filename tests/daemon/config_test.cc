#include "daemon/config.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace cclo::daemon {
namespace {

TEST(ConfigTest, EmptyTextGivesDefaults) {
  absl::StatusOr<Config> config = ParseConfig("");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime_dir, "/run/cclod");
  EXPECT_EQ(config->peer_port, 7470);
  EXPECT_EQ(config->metrics_port, 9464);
  EXPECT_EQ(config->op_deadline, absl::Seconds(60));
  EXPECT_EQ(config->eager_max_bytes, 262144u);
  EXPECT_EQ(config->data_tcp_congestion, "");  // the host's
  EXPECT_EQ(config->rx_pool_bytes, 256ull << 20);
  EXPECT_EQ(config->scratch_max_bytes, 4ull << 30);
  EXPECT_EQ(config->credits_per_peer, 8u);
  EXPECT_EQ(config->rendezvous_waiting_per_peer, 65536u);
  EXPECT_EQ(config->peer_timeout, absl::Seconds(10));
}

TEST(ConfigTest, UnsetEagerLimitFollowsASmallerSegment) {
  absl::StatusOr<Config> config = ParseConfig("segment_bytes: 4096\nrx_pool_bytes: 65536\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->eager_max_bytes, 4096u);
  config = ParseConfig("segment_bytes: 8192\neager_max_bytes: 0\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->eager_max_bytes, 0u);
}

TEST(ConfigTest, ReadsEveryKey) {
  absl::StatusOr<Config> config = ParseConfig(R"(
runtime_dir: /tmp/x
host: 10.0.0.2
peer_port: 0
data_port: 9000
metrics_host: 10.1.0.2
metrics_port: 9999
rx_pool_bytes: 1048576
scratch_max_bytes: 2097152
segment_bytes: 65536
eager_max_bytes: 16384
credits_per_peer: 3
rendezvous_waiting_per_peer: 100
peer_timeout_ms: 2500
data_link_gbps: 25
data_tcp_congestion: cubic
max_buffer_bytes: 8192
op_deadline_ms: 1500
join_timeout_ms: 2000
log_level: debug
log_format: json
peer_tls_cert_file: /etc/tls/node.pem
peer_tls_key_file: /etc/tls/node.key
peer_tls_ca_file: /etc/tls/ca.pem
policy:
  rules: [{collective: allreduce, bytes: {max: 64K}, algorithm: ring}]
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->runtime_dir, "/tmp/x");
  EXPECT_EQ(config->host, "10.0.0.2");
  EXPECT_EQ(config->peer_port, 0);
  EXPECT_EQ(config->data_port, 9000);
  EXPECT_EQ(config->metrics_host, "10.1.0.2");
  EXPECT_EQ(config->metrics_port, 9999);
  EXPECT_EQ(config->rx_pool_bytes, 1048576u);
  EXPECT_EQ(config->scratch_max_bytes, 2097152u);
  EXPECT_EQ(config->segment_bytes, 65536u);
  EXPECT_EQ(config->eager_max_bytes, 16384u);
  EXPECT_EQ(config->credits_per_peer, 3u);
  EXPECT_EQ(config->rendezvous_waiting_per_peer, 100u);
  EXPECT_EQ(config->peer_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(config->data_link_gbps, 25u);
  EXPECT_EQ(config->data_tcp_congestion, "cubic");
  EXPECT_EQ(config->max_buffer_bytes, 8192u);
  EXPECT_EQ(config->op_deadline, absl::Milliseconds(1500));
  EXPECT_EQ(config->join_timeout, absl::Seconds(2));
  EXPECT_EQ(config->log_level, "debug");
  EXPECT_EQ(config->log_format, "json");
  EXPECT_EQ(config->peer_tls_cert_file, "/etc/tls/node.pem");
  EXPECT_EQ(config->peer_tls_key_file, "/etc/tls/node.key");
  EXPECT_EQ(config->peer_tls_ca_file, "/etc/tls/ca.pem");
  ASSERT_EQ(config->policy.rules_size(), 1);
  EXPECT_EQ(config->policy.rules(0).max_bytes(), 65536u);
}

TEST(ConfigTest, ReadsTenants) {
  absl::StatusOr<Config> config = ParseConfig(R"(
admin_group: cclo-admin
scheduler: fifo
default_tenant: ""
tenants:
  - name: training
    users: [alice]
    groups: [ml]
    weight: 3
    quotas: {buffer_bytes: 1073741824, communicators: 8, inflight_ops: 64, sessions: 4,
             scratch_bytes: 2097152}
  - name: batch
    uids: [1001, 1002]
)");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->admin_group, "cclo-admin");
  EXPECT_EQ(config->scheduler, "fifo");
  EXPECT_EQ(config->default_tenant, "");
  ASSERT_EQ(config->tenants.size(), 2u);
  const TenantConfig& training = config->tenants[0];
  EXPECT_EQ(training.name, "training");
  EXPECT_EQ(training.users, std::vector<std::string>{"alice"});
  EXPECT_EQ(training.groups, std::vector<std::string>{"ml"});
  EXPECT_EQ(training.weight, 3u);
  EXPECT_EQ(training.quotas.buffer_bytes, 1ull << 30);
  EXPECT_EQ(training.quotas.communicators, 8u);
  EXPECT_EQ(training.quotas.inflight_ops, 64u);
  EXPECT_EQ(training.quotas.sessions, 4u);
  EXPECT_EQ(training.quotas.scratch_bytes, 2u << 20);
  const TenantConfig& batch = config->tenants[1];
  EXPECT_EQ(batch.uids, (std::vector<uint32_t>{1001, 1002}));
  EXPECT_EQ(batch.weight, 1u);
  EXPECT_EQ(batch.quotas.sessions, TenantQuotas{}.sessions);
  EXPECT_EQ(batch.quotas.scratch_bytes, TenantQuotas{}.scratch_bytes);
}

// Other daemons dial `host`: a name, an IPv4 address or an IPv6 one (without brackets).
TEST(ConfigTest, HostIsANameOrAnAddressOtherDaemonsCanDial) {
  for (const std::string host : {"10.0.0.2", "::1", "fd00::7", "node-7.cluster"}) {
    absl::StatusOr<Config> config = ParseConfig(absl::StrCat("host: '", host, "'"));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->host, host);
  }
}

TEST(ConfigTest, DefaultIsOneDefaultTenantTakingEveryone) {
  absl::StatusOr<Config> config = ParseConfig("");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->tenants.size(), 1u);
  EXPECT_EQ(config->tenants[0].name, "default");
  EXPECT_EQ(config->default_tenant, "default");
  EXPECT_EQ(config->scheduler, "drr");
}

struct BadConfig {
  std::string yaml;
  std::string error;
};

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, IsRejectedNamingKeyAndValue) {
  absl::StatusOr<Config> config = ParseConfig(GetParam().yaml);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find(GetParam().error), std::string::npos) << config.status();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadConfigTest,
    ::testing::Values(
        BadConfig{"peer_prot: 1", "unknown config key 'peer_prot'; valid keys: "},
        BadConfig{"data_port: 70000", "config key 'data_port': '70000' is not a whole number"},
        BadConfig{"data_port: -1", "'data_port'"},
        BadConfig{"data_port: abc", "'abc' is not a whole number in [0, 65535]"},
        BadConfig{"op_deadline_ms: 0", "'op_deadline_ms': '0' is not a duration"},
        BadConfig{"log_level: loud", "'loud' is not one of"},
        BadConfig{"log_format: JSON", "config key 'log_format': 'JSON' is not one of plain, json"},
        BadConfig{"log_format: [json]", "config key 'log_format': expected a string"},
        BadConfig{"runtime_dir: [a, b]", "'runtime_dir': expected a string"},
        BadConfig{"- a\n- b", "must be a YAML mapping"}, BadConfig{"a: [", "not valid YAML"},
        BadConfig{"segment_bytes: 33554432",
                  "'33554432' is not a whole number in [4096, 16777216]"},
        BadConfig{"segment_bytes: 4100", "'segment_bytes': 4100 is not a multiple of 8"},
        BadConfig{"rx_pool_bytes: 65536\nsegment_bytes: 131072",
                  "segment_bytes 131072 exceeds rx_pool_bytes 65536"},
        BadConfig{"eager_max_bytes: 16777217",
                  "config key 'eager_max_bytes': '16777217' is not a whole number in [0, "
                  "16777216]"},
        BadConfig{"eager_max_bytes: -1", "'eager_max_bytes'"},
        BadConfig{"segment_bytes: 65536\neager_max_bytes: 65544",
                  "config: eager_max_bytes 65544 exceeds segment_bytes 65536 (an eager message "
                  "travels as one segment)"},
        BadConfig{"credits_per_peer: 65537",
                  "config key 'credits_per_peer': '65537' is not a whole number in [0, 65536]"},
        BadConfig{"credits_per_peer: many", "'many' is not a whole number in [0, 65536]"},
        BadConfig{"rendezvous_waiting_per_peer: 0",
                  "config key 'rendezvous_waiting_per_peer': '0' is not a whole number in [1, "
                  "16777216]"},
        BadConfig{"peer_timeout_ms: 999",
                  "config key 'peer_timeout_ms': '999' is not a duration in milliseconds in "
                  "[1000, 86400000]"},
        BadConfig{"data_link_gbps: 100001",
                  "config key 'data_link_gbps': '100001' is not a whole number in [0, 100000]"},
        BadConfig{"data_link_gbps: 2.5", "'2.5' is not a whole number in [0, 100000]"},
        BadConfig{"host: 0.0.0.0",
                  "config key 'host': '0.0.0.0' is the unspecified address, which other daemons "
                  "cannot dial (rank tables and communicator tokens carry host); give this "
                  "node's address on the cluster network"},
        BadConfig{"host: '::'", "config key 'host': '::' is the unspecified address"},
        BadConfig{"host: '0'", "config key 'host': '0' is the unspecified address"},
        BadConfig{"host: '::ffff:0.0.0.0'",
                  "config key 'host': '::ffff:0.0.0.0' is the unspecified address"},
        BadConfig{"host: '[::1]'",
                  "config key 'host': '[::1]' is not an IPv6 address (write one without "
                  "brackets, e.g. ::1)"},
        BadConfig{"host: ''",
                  "config key 'host': is empty; give this node's address on the cluster network"},
        BadConfig{"data_port: 010000",
                  "config key 'data_port': '010000' is not a whole number in [0, 65535] written "
                  "in decimal digits (no sign, no leading 0, no 0x)"},
        BadConfig{"rx_pool_bytes: 0x100000",
                  "config key 'rx_pool_bytes': '0x100000' is not a whole number in [65536, "
                  "68719476736] written in decimal digits"},
        BadConfig{"metrics_port: +80", "config key 'metrics_port': '+80' is not a whole number"},
        BadConfig{"scratch_max_bytes: 1000",
                  "config key 'scratch_max_bytes': '1000' is not a whole number in [1048576, "
                  "281474976710656]"},
        BadConfig{"join_timeout_ms: 060000",
                  "config key 'join_timeout_ms': '060000' is not a duration in milliseconds in "
                  "[1, 86400000] written in decimal digits"},
        BadConfig{"tenants: [{name: a, quotas: {buffer_bytes: 0x10}}]",
                  "tenant 0: 'buffer_bytes': '0x10' is not a whole number in [0, "
                  "281474976710656] written in decimal digits"},
        BadConfig{"tenants: [{name: a, weight: 010}]",
                  "tenant 0: 'weight': '010' is not a whole number in [1, 1000] written"},
        BadConfig{"tenants: [{name: a, uids: [01750]}]",
                  "tenant 0: 'uids': '01750' is not a whole number in [0, 4294967295] written"},
        BadConfig{"data_tcp_congestion: 'cubic; reno'",
                  "config key 'data_tcp_congestion': 'cubic; reno' is not a congestion control "
                  "name (up to 15 letters, digits or '_')"},
        BadConfig{"data_tcp_congestion: abcdefghijklmnop",
                  "'abcdefghijklmnop' is not a congestion control name"},
        BadConfig{"tenants: []", "config key 'tenants': expected a non-empty list of tenants"},
        BadConfig{"tenants: [{name: Big}]",
                  "tenant 0: tenant name 'Big' is not 1 to 32 characters of a-z, 0-9, _ and -"},
        BadConfig{"tenants: [{uids: [1]}]", "tenant 0: tenant name '' is not 1 to 32"},
        BadConfig{"tenants: [{name: a, weight: 0}]",
                  "tenant 0: 'weight': '0' is not a whole number in [1, 1000]"},
        BadConfig{"tenants: [{name: a, color: red}]",
                  "unknown tenant key 'color'; valid: name, uids, users, groups, weight, quotas"},
        BadConfig{
            "tenants: [{name: a, quotas: {memory: 1}}]",
            "unknown quota 'memory'; valid: buffer_bytes, buffers, communicators, inflight_ops, "
            "scratch_bytes, sessions"},
        BadConfig{"tenants: [{name: a, quotas: {scratch_bytes: 1e9}}]",
                  "tenant 0: 'scratch_bytes': '1e9' is not a whole number in [0, "
                  "281474976710656] written in decimal digits"},
        BadConfig{"tenants: [{name: a, quotas: {sessions: -1}}]", "'sessions': '-1' is not"},
        BadConfig{"tenants: [{name: a, uids: 5}]", "'uids' must be a list"},
        BadConfig{"tenants: [{name: a, users: [bob]}, {name: b, users: [bob]}]",
                  "user bob is listed by tenants 'a' and 'b'"},
        BadConfig{"tenants: [{name: a}, {name: a}]", "tenant 'a' is listed twice"},
        BadConfig{"tenants: [{name: a, weight: 2, weight: 3}]",
                  "tenant 0: tenant key 'weight' is given twice"},
        BadConfig{"tenants: [{name: a, quotas: {sessions: 1, sessions: 2}}]",
                  "tenant 0: quota 'sessions' is given twice"},
        BadConfig{"tenants: [{name: a}]",
                  "config key 'default_tenant': 'default' names no tenant (tenants: a); '' "
                  "refuses unknown callers"},
        BadConfig{"scheduler: lottery",
                  "config key 'scheduler': 'lottery' is not one of drr, fifo"},
        BadConfig{"peer_tls_cert_file: /a.pem",
                  "config: peer TLS needs peer_tls_cert_file, peer_tls_key_file and "
                  "peer_tls_ca_file together; peer_tls_cert_file is '/a.pem' but "
                  "peer_tls_key_file and peer_tls_ca_file are not set"},
        BadConfig{"data_port: 1\ndata_port: 2", "config key 'data_port' is given twice"},
        BadConfig{"{[data_port]: 1}", "config key '[data_port]' is not a plain name"},
        BadConfig{"tenants: [{name: a, {x: 1}: 2}]", "tenant 0: key '{x: 1}' is not a plain name"},
        BadConfig{"tenants: [{name: a, quotas: {[sessions]: 1}}]",
                  "tenant 0: key '[sessions]' is not a plain name"},
        BadConfig{"policy: {rules: [{collective: bcast, algorithm: ring}]}",
                  "config key 'policy': rule 1: algorithm 'ring' cannot serve bcast"},
        BadConfig{"policy: {rules: [{collective: bcast, tenant: ml, algorithm: chain}]}",
                  "config key 'policy': rule 1: tenant 'ml' is not configured (tenants: "
                  "default)"},
        BadConfig{"peer_tls_cert_file: /a.pem\npeer_tls_ca_file: /ca.pem",
                  "; peer_tls_cert_file is '/a.pem', peer_tls_ca_file is '/ca.pem' but "
                  "peer_tls_key_file is not set"}));

TEST(ConfigTest, MissingFileIsNotFound) {
  absl::StatusOr<Config> config = LoadConfig("/nonexistent/cclod.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cclo::daemon
