#include "daemon/config.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/policy.h"
#include "hw/poe/handshake.h"
#include "hw/poe/tcp/engine.h"
#include "hw/poe/wire.h"
#include "tests/fuzz/mutator.h"
#include "yaml-cpp/yaml.h"

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

/// A config that sets every plain key (not tenants).
constexpr char kEveryKey[] = R"(
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
)";

TEST(ConfigTest, ReadsEveryKey) {
  absl::StatusOr<Config> config = ParseConfig(kEveryKey);
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

/// Two tenants with every tenant key.
constexpr char kTenants[] = R"(
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
)";

TEST(ConfigTest, ReadsTenants) {
  absl::StatusOr<Config> config = ParseConfig(kTenants);
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
  for (const std::string host : {"10.0.0.2", "::1", "fd00::7", "fe80::7%lo", "node-7.cluster"}) {
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
        // Each failed to bind at start with exit code 1, which systemd retries.
        BadConfig{"peer_port: 7000\ndata_port: 7000",
                  "config keys 'peer_port' and 'data_port' are both 7000 on host 127.0.0.1: "
                  "each server needs a port of its own"},
        BadConfig{"data_port: 7000\nmetrics_port: 7000",
                  "config keys 'data_port' and 'metrics_port' are both 7000"},
        BadConfig{"peer_port: 7000\nmetrics_host: 127.0.0.1\nmetrics_port: 7000",
                  "config keys 'peer_port' and 'metrics_port' are both 7000"},
        BadConfig{"op_deadline_ms: 0", "'op_deadline_ms': '0' is not a duration"},
        BadConfig{"log_level: loud", "'loud' is not one of"},
        BadConfig{"log_format: JSON", "config key 'log_format': 'JSON' is not one of plain, json"},
        BadConfig{"log_format: [json]", "config key 'log_format': expected a string"},
        BadConfig{"runtime_dir: [a, b]", "'runtime_dir': expected a string"},
        // Its sockets could not be bound: a start exited 1 (retried), a reload took it.
        BadConfig{"runtime_dir: /tmp/" + std::string(91, 'd'),
                  "config key 'runtime_dir': '/tmp/" + std::string(91, 'd') +
                      "' is too long: socket path '/tmp/" + std::string(91, 'd') +
                      "/attach.sock' has 108 bytes; at most 107 fit"},
        BadConfig{"runtime_dir: ''",
                  "config key 'runtime_dir': is empty; give the dir of cclod's sockets (as "
                  "/run/cclod)"},
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
        BadConfig{"host: \"caf\xe9\"",
                  "config key 'host': 'caf\xe9' is not printable ASCII without spaces: rank "
                  "tables and communicator tokens carry host, and other daemons refuse any other "
                  "address"},
        BadConfig{"host: 'node 7'", "config key 'host': 'node 7' is not printable ASCII"},
        BadConfig{"host: ''",
                  "config key 'host': is empty; give this node's address on the cluster network"},
        // Its bind failed at start ('Invalid argument') with exit code 1, which systemd retries.
        BadConfig{"host: 'fe80::7'",
                  "config key 'host': 'fe80::7' is a link-local address without its interface; "
                  "write it with one, as fe80::7%eth0 (other daemons dial it through their "
                  "interface of that name)"},
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
            "scratch_bytes, sessions, waiting_calls"},
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

TEST(ConfigTest, MetricsOnAnotherAddressMayShareAPortNumber) {
  absl::StatusOr<Config> config =
      ParseConfig("peer_port: 7000\nmetrics_host: 127.0.0.2\nmetrics_port: 7000\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->metrics_port, 7000);
}

TEST(ConfigTest, DirectoryIsNotReadAsAnEmptyFile) {
  // It was: the daemon then ran with every default (runtime dir, ports, one tenant).
  const std::string dir = ::testing::TempDir();
  absl::StatusOr<Config> config = LoadConfig(dir);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(config.status().message(),
            absl::StrCat("cannot read config file ", dir, ": Is a directory"));
}

/// A numeric key, its range (deploy/cclod.yaml documents them) and how to read it back.
struct NumericKey {
  const char* key;
  uint64_t min;
  uint64_t max;
  std::function<uint64_t(const Config&)> value;
  uint64_t multiple_of = 1;
};

const std::vector<NumericKey>& NumericKeys() {
  auto millis = [](absl::Duration Config::*field) {
    return [field](const Config& c) { return absl::ToInt64Milliseconds(c.*field); };
  };
  static const auto* keys = new std::vector<NumericKey>{
      {"peer_port", 0, 65535, [](const Config& c) { return c.peer_port; }},
      {"data_port", 0, 65535, [](const Config& c) { return c.data_port; }},
      {"metrics_port", 0, 65535, [](const Config& c) { return c.metrics_port; }},
      {"rx_pool_bytes", 1 << 16, 1ull << 36, [](const Config& c) { return c.rx_pool_bytes; }},
      {"scratch_max_bytes", 1 << 20, 1ull << 48,
       [](const Config& c) { return c.scratch_max_bytes; }},
      {"segment_bytes", hw::poe::kMinSegmentBytes, hw::poe::kMaxSegmentBytes,
       [](const Config& c) { return c.segment_bytes; }, 8},
      {"eager_max_bytes", 0, hw::poe::kMaxSegmentBytes,
       [](const Config& c) { return c.eager_max_bytes; }},
      {"credits_per_peer", 0, hw::poe::kMaxCredits,
       [](const Config& c) { return c.credits_per_peer; }},
      {"rendezvous_waiting_per_peer", 1, 1 << 24,
       [](const Config& c) { return c.rendezvous_waiting_per_peer; }},
      {"peer_timeout_ms", hw::poe::kMinPeerTimeoutMs, hw::poe::kMaxPeerTimeoutMs,
       millis(&Config::peer_timeout)},
      {"data_link_gbps", 0, 100000, [](const Config& c) { return c.data_link_gbps; }},
      {"max_buffer_bytes", 4096, 1ull << 40, [](const Config& c) { return c.max_buffer_bytes; }},
      {"op_deadline_ms", 1, 86'400'000, millis(&Config::op_deadline)},
      {"join_timeout_ms", 1, 86'400'000, millis(&Config::join_timeout)},
  };
  return *keys;
}

/// What every config ParseConfig accepts satisfies (config.h, deploy/cclod.yaml).
void ExpectWithinBounds(const Config& config, const std::string& yaml) {
  for (const NumericKey& key : NumericKeys()) {
    EXPECT_GE(key.value(config), key.min) << key.key << " of\n" << yaml;
    EXPECT_LE(key.value(config), key.max) << key.key << " of\n" << yaml;
    EXPECT_EQ(key.value(config) % key.multiple_of, 0u) << key.key << " of\n" << yaml;
  }
  EXPECT_LE(config.segment_bytes, config.rx_pool_bytes) << yaml;
  EXPECT_LE(config.eager_max_bytes, config.segment_bytes) << yaml;
  // The names config.h lists, and spdlog's own for two of them (ParseLogLevel takes its names).
  EXPECT_TRUE(std::set<std::string>(
                  {"trace", "debug", "info", "warn", "error", "critical", "off", "warning", "err"})
                  .contains(config.log_level))
      << yaml;
  EXPECT_TRUE(config.scheduler == "drr" || config.scheduler == "fifo") << yaml;
  EXPECT_TRUE(config.data_tcp_congestion.empty() ||
              hw::poe::tcp::IsCongestionName(config.data_tcp_congestion))
      << yaml;
  for (const char* unspecified : {"", "0", "0.0.0.0", "::", "::ffff:0.0.0.0"}) {
    EXPECT_NE(config.host, unspecified) << yaml;
  }
  const int tls_files = !config.peer_tls_cert_file.empty() + !config.peer_tls_key_file.empty() +
                        !config.peer_tls_ca_file.empty();
  EXPECT_TRUE(tls_files == 0 || tls_files == 3) << yaml;
  ASSERT_FALSE(config.tenants.empty()) << yaml;
  std::vector<std::string> names;
  std::set<std::string> identities;
  for (const TenantConfig& tenant : config.tenants) {
    EXPECT_FALSE(tenant.name.empty()) << yaml;
    EXPECT_LE(tenant.name.size(), 32u) << yaml;
    EXPECT_EQ(tenant.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-"),
              std::string::npos)
        << yaml;
    EXPECT_EQ(std::count(names.begin(), names.end(), tenant.name), 0) << yaml;
    names.push_back(tenant.name);
    EXPECT_GE(tenant.weight, 1u) << yaml;
    EXPECT_LE(tenant.weight, 1000u) << yaml;
    const TenantQuotas& quotas = tenant.quotas;
    EXPECT_LE(quotas.buffer_bytes, 1ull << 48) << yaml;
    EXPECT_LE(quotas.scratch_bytes, 1ull << 48) << yaml;
    for (uint32_t quota :
         {quotas.communicators, quotas.inflight_ops, quotas.sessions, quotas.buffers}) {
      EXPECT_LE(quota, 1u << 20) << yaml;
    }
    for (uint32_t uid : tenant.uids) {
      EXPECT_TRUE(identities.insert(absl::StrCat("uid ", uid)).second) << yaml;
    }
    for (const std::string& user : tenant.users) {
      EXPECT_TRUE(identities.insert("user " + user).second) << yaml;
    }
    for (const std::string& group : tenant.groups) {
      EXPECT_TRUE(identities.insert("group " + group).second) << yaml;
    }
  }
  EXPECT_TRUE(config.default_tenant.empty() ||
              std::count(names.begin(), names.end(), config.default_tenant) == 1)
      << yaml;
  EXPECT_TRUE(ValidatePolicy(config.policy).ok()) << yaml;
  EXPECT_TRUE(CheckPolicyTenants(config.policy, names).ok()) << yaml;
}

/// A number as the config documents them: decimal digits, no sign, no leading 0; nullopt
/// for anything else or more than 64 bits. The test's own reading.
std::optional<uint64_t> Decimal(const YAML::Node& node) {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789") != std::string::npos ||
      (text.size() > 1 && text[0] == '0')) {
    return std::nullopt;
  }
  absl::uint128 value = 0;
  for (char digit : text) value = value * 10 + (digit - '0');
  if (value > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(value);
}

/// Every number of an accepted config is the one its YAML gives, written as documented.
void ExpectAsWritten(const Config& config, const std::string& yaml) {
  const YAML::Node root = YAML::Load(yaml);
  if (!root.IsMap()) return;
  for (const NumericKey& key : NumericKeys()) {
    if (root[key.key]) {
      EXPECT_EQ(Decimal(root[key.key]), key.value(config)) << key.key << " of\n" << yaml;
    }
  }
  if (!root["tenants"]) return;
  ASSERT_EQ(root["tenants"].size(), config.tenants.size()) << yaml;
  for (size_t i = 0; i < config.tenants.size(); ++i) {
    const YAML::Node tenant = root["tenants"][i];
    const TenantConfig& parsed = config.tenants[i];
    if (tenant["weight"]) EXPECT_EQ(Decimal(tenant["weight"]), parsed.weight) << yaml;
    for (size_t u = 0; tenant["uids"] && u < tenant["uids"].size(); ++u) {
      EXPECT_EQ(Decimal(tenant["uids"][u]), parsed.uids.at(u)) << yaml;
    }
    const std::pair<const char*, uint64_t> quotas[] = {
        {"buffer_bytes", parsed.quotas.buffer_bytes},
        {"scratch_bytes", parsed.quotas.scratch_bytes},
        {"communicators", parsed.quotas.communicators},
        {"inflight_ops", parsed.quotas.inflight_ops},
        {"sessions", parsed.quotas.sessions},
        {"buffers", parsed.quotas.buffers},
        {"waiting_calls", parsed.quotas.waiting_calls}};
    for (const auto& [quota, value] : quotas) {
      if (tenant["quotas"] && tenant["quotas"][quota]) {
        EXPECT_EQ(Decimal(tenant["quotas"][quota]), value) << quota << " of\n" << yaml;
      }
    }
  }
}

/// A config of random keys with valid values but for at most one fault: a value at, past
/// or around a bound, of another type, or a key too many or too few.
std::string RandomConfig(testing::Mutator& random) {
  // Signs, bases, exponents, separators, past 64 bits; not a number at all.
  static const std::vector<std::string> kOddNumbers = {
      "-1",   "+1", "0x10", "010", "1e3",   "1.5", "1_000", "' 1'", "18446744073709551616",
      "true", "~",  "",     "[1]", "{a: 1}"};
  // Each string key: valid values, then others.
  static const std::vector<
      std::tuple<std::string, std::vector<std::string>, std::vector<std::string>>>
      kStrings = {{"runtime_dir", {"/tmp/x", "''", "'a b'"}, {"[a]", "{a: 1}"}},
                  {"host",
                   {"127.0.0.1", "10.0.0.2", "'fd00::7'", "node-7", "'::1'", "localhost"},
                   {"0.0.0.0", "'::'", "'0'", "'0.0'", "'::ffff:0.0.0.0'", "'[::1]'", "''", "~"}},
                  {"metrics_host", {"''", "127.0.0.1", "node-7"}, {"[a]"}},
                  {"data_tcp_congestion",
                   {"''", "cubic", "bbr", "reno_2", "abcdefghijklmno"},
                   {"abcdefghijklmnop", "'cubic; reno'", "{a: 1}"}},
                  {"log_level",
                   {"trace", "debug", "info", "warn", "error", "critical", "off"},
                   {"warning", "loud", "''", "INFO", "~"}},
                  {"admin_group", {"''", "cclo-admin"}, {"[a]"}},
                  {"scheduler", {"drr", "fifo"}, {"lottery", "DRR", "''"}}};
  static const std::vector<std::string> kTenantNames = {"default", "ml", "batch", "a-b_0",
                                                        std::string(32, 'x')};
  static const std::vector<std::string> kOddTenantNames = {"ML",    "''", std::string(33, 'x'),
                                                           "'a b'", "~",  "[a]"};
  static const std::vector<std::string> kOddPolicies = {
      "{rules: [{collective: bcast, algorithm: ring}]}", "[]", "{}", "~",
      "{rules: [{collective: bcast, tenant: nobody, algorithm: chain}]}"};
  random.AimFault(20);
  // A number in [min, max], a multiple of `multiple_of`, small ones likelier; else one
  // just past a bound, not a multiple, or not a number as the config takes them. Sets
  // `chosen` to a valid number it gave.
  auto number = [&](uint64_t min, uint64_t max, uint64_t multiple_of = 1,
                    uint64_t* chosen = nullptr) -> std::string {
    if (random.Fault()) {
      switch (random.Below(4)) {
        case 0:
          if (min > 0 && chosen != nullptr) *chosen = min - 1;
          return absl::StrCat(min - 1);  // wraps for 0, which is past any bound too
        case 1:
          return absl::StrCat(max + 1);
        case 2:
          if (multiple_of > 1) return absl::StrCat(min + 1 + random.Below(multiple_of - 1));
          [[fallthrough]];
        default:
          return random.Pick(kOddNumbers);
      }
    }
    uint64_t value = min;
    switch (random.Below(4)) {
      case 0:
        break;
      case 1:
        value = max;
        break;
      default:
        value = min + random.Below(1 + ((max - min) >> random.Below(48)));
        value = std::max(min, value - value % multiple_of);
    }
    if (chosen != nullptr) *chosen = value;
    return absl::StrCat(value);
  };
  std::vector<std::string> entries;
  // The sizes that go together, each within the next: eager <= segment <= rx pool.
  uint64_t rx_pool = Config{}.rx_pool_bytes, segment = Config{}.segment_bytes;
  if (random.OneIn(3)) {
    entries.push_back("rx_pool_bytes: " + number(1 << 16, 1ull << 36, 1, &rx_pool));
  }
  if (random.OneIn(3)) {
    entries.push_back(
        "segment_bytes: " +
        number(hw::poe::kMinSegmentBytes,
               std::min<uint64_t>(hw::poe::kMaxSegmentBytes, std::max<uint64_t>(rx_pool, 4096)), 8,
               &segment));
  }
  if (random.OneIn(3)) entries.push_back("eager_max_bytes: " + number(0, segment));
  for (const NumericKey& key : NumericKeys()) {
    if (std::set<std::string>{"rx_pool_bytes", "segment_bytes", "eager_max_bytes"}.contains(
            key.key)) {
      continue;
    }
    if (random.OneIn(4)) {
      entries.push_back(absl::StrCat(key.key, ": ", number(key.min, key.max, key.multiple_of)));
    }
  }
  for (const auto& [key, values, odd] : kStrings) {
    if (random.OneIn(4)) {
      entries.push_back(
          absl::StrCat(key, ": ", random.Fault() ? random.Pick(odd) : random.Pick(values)));
    }
  }
  if (random.OneIn(6)) {
    for (const char* key : {"peer_tls_cert_file", "peer_tls_key_file", "peer_tls_ca_file"}) {
      if (!random.Fault()) entries.push_back(absl::StrCat(key, ": /etc/tls/", key));
    }
  }
  std::vector<std::string> names = {"default"};
  if (random.OneIn(2)) {
    // Names and identities of their own, but for the fault.
    names = kTenantNames;
    random.Shuffle(names);
    names.resize(random.Fault() ? random.Below(2) : 1 + random.Below(3));
    std::vector<std::string> tenants;
    for (size_t i = 0; i < names.size(); ++i) {
      // The fault: the first one's name or identities, or a name of another form.
      const size_t self = i > 0 && random.Fault() ? 0 : i;
      std::string name = i > 0 && random.Fault() ? names[0] : names[i];
      if (random.Fault()) name = random.Pick(kOddTenantNames);
      std::vector<std::string> fields = {"name: " + name};
      if (random.OneIn(3)) {
        // Any uid for the first, where no other can take it.
        fields.push_back(
            absl::StrCat("uids: [", self == 0 ? number(0, 999) : absl::StrCat(1000 + self), "]"));
      }
      if (random.OneIn(3)) {
        fields.push_back(random.Fault() ? "users: alice"
                                        : absl::StrCat("users: [alice", self, "]"));
      }
      if (random.OneIn(3)) {
        fields.push_back(random.Fault() ? "groups: [[ml]]"
                                        : absl::StrCat("groups: [ml", self, "]"));
      }
      if (random.OneIn(3)) fields.push_back("weight: " + number(1, 1000));
      if (random.OneIn(3)) {
        std::vector<std::string> quotas;
        for (const char* quota : {"buffer_bytes", "scratch_bytes"}) {
          if (random.OneIn(2)) quotas.push_back(absl::StrCat(quota, ": ", number(0, 1ull << 48)));
        }
        for (const char* quota :
             {"communicators", "inflight_ops", "sessions", "buffers", "waiting_calls"}) {
          if (random.OneIn(2)) quotas.push_back(absl::StrCat(quota, ": ", number(0, 1 << 20)));
        }
        if (random.Fault()) quotas.push_back("memory: 1");
        fields.push_back(absl::StrCat("quotas: {", absl::StrJoin(quotas, ", "), "}"));
      }
      if (random.Fault()) fields.push_back("color: red");
      tenants.push_back(absl::StrCat("{", absl::StrJoin(fields, ", "), "}"));
    }
    entries.push_back(absl::StrCat("tenants: [", absl::StrJoin(tenants, ", "), "]"));
    // One of them, none, or (the fault) another.
    std::string default_tenant = names.empty() || random.OneIn(3) ? "''" : random.Pick(names);
    if (random.Fault()) default_tenant = "nobody";
    entries.push_back("default_tenant: " + default_tenant);
  }
  if (random.OneIn(4)) {
    // A rule for all, or for a tenant there is.
    std::string policy = "{rules: [{collective: allreduce, algorithm: ring}]}";
    if (!names.empty() && random.OneIn(2)) {
      policy = absl::StrCat("{rules: [{collective: bcast, tenant: ", random.Pick(names),
                            ", algorithm: chain}]}");
    }
    if (random.Fault()) policy = random.Pick(kOddPolicies);
    entries.push_back("policy: " + policy);
  }
  if (random.Fault()) entries.push_back("peer_prot: 1");
  if (random.Fault() && !entries.empty()) entries.push_back(entries[random.Below(entries.size())]);
  random.Shuffle(entries);
  return absl::StrJoin(entries, "\n") + "\n";
}

TEST(ConfigTest, RandomTextIsRejectedNamingTheKeyOrStaysWithinBounds) {
  testing::Mutator random(5);
  const std::vector<std::string> tokens = testing::Mutator::YamlTokens(
      {"segment_bytes: ", "rx_pool_bytes: ", "eager_max_bytes: ", "tenants: ", "name: ", "uids: ",
       "quotas: ", "default_tenant: ", "policy: ", "host: ", "4100", "65536", "16777216"});
  const std::vector<std::string> seeds = {kEveryKey, kTenants};
  int accepted = 0;
  constexpr int kRounds = 5000;
  for (int round = 0; round < kRounds; ++round) {
    std::string yaml = round % 4 != 3 ? RandomConfig(random) : random.Pick(seeds);
    if (round % 4 == 3 || random.OneIn(4)) random.EditText(yaml, tokens);
    absl::StatusOr<Config> config = ParseConfig(yaml);
    if (!config.ok()) {
      EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << yaml;
      EXPECT_FALSE(config.status().message().empty()) << yaml;
      continue;
    }
    ++accepted;
    ExpectWithinBounds(*config, yaml);
    ExpectAsWritten(*config, yaml);
  }
  // Enough of them pass to say something of what passes.
  EXPECT_GT(accepted, kRounds / 10);
}

}  // namespace
}  // namespace cclo::daemon
