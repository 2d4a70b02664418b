// cclod's configuration: a YAML file, every key optional, defaults below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cclo/v1/types.pb.h"
#include "spdlog/common.h"

namespace cclo::daemon {

/// What one tenant may hold at a time.
struct TenantQuotas {
  uint64_t buffer_bytes = 16ull << 30;  ///< bytes of shared-memory buffers
  uint32_t communicators = 256;         ///< communicator memberships (handles)
  uint32_t inflight_ops = 1024;         ///< ops submitted and not finished
  uint32_t sessions = 64;               ///< attached client sessions
  uint32_t buffers = 4096;              ///< shared-memory buffers (each is a mapping)
  /// Client RPCs that may wait, at once: Wait with a timeout, Submit with wait_for_room and
  /// JoinCommunicator. Each holds one of the daemon's threads while it waits.
  uint32_t waiting_calls = 256;
  /// Scratch memory of the engine its running calls hold (within scratch_max_bytes); the
  /// engine counts it, and refuses a call that would take more.
  uint64_t scratch_bytes = 4ull << 30;

  bool operator==(const TenantQuotas&) const = default;
};

/// A tenant: who belongs to it (any of the listed uids, user names or group names, as
/// SO_PEERCRED and the user database say), its share of the engine and its quotas.
struct TenantConfig {
  std::string name;  ///< [a-z0-9_-], 1..32 characters: also a metric label
  std::vector<uint32_t> uids;
  std::vector<std::string> users;
  std::vector<std::string> groups;  ///< the caller's primary or supplementary groups
  uint32_t weight = 1;              ///< share of the engine, 1..1000
  TenantQuotas quotas;

  bool operator==(const TenantConfig&) const = default;
};

struct Config {
  /// Directory holding attach.sock, client.sock and admin.sock.
  std::string runtime_dir = "/run/cclod";
  /// Address this daemon listens on for other daemons and gives them in rank tables.
  std::string host = "127.0.0.1";
  /// Port of the Peer gRPC service; 0 picks a free one.
  uint16_t peer_port = 7470;
  /// Port the engine accepts data sessions on; 0 picks a free one.
  uint16_t data_port = 7471;
  /// Address of the Prometheus exposition (HTTP /metrics); empty: `host`. The HTTP server
  /// (civetweb as Debian builds it) has no IPv6, so an IPv6 `host` needs an IPv4 one here.
  std::string metrics_host;
  /// Prometheus exposition port; 0 picks a free one.
  uint16_t metrics_port = 9464;
  /// Eager rx buffer pool of the engine, and the segment size of transfers.
  uint64_t rx_pool_bytes = 256ull << 20;
  uint64_t segment_bytes = 1ull << 20;
  /// Scratch memory the engine's running calls may hold in all (tenants' quotas do not
  /// count it); a call that would take more fails RESOURCE_EXHAUSTED.
  uint64_t scratch_max_bytes = 4ull << 30;
  /// Largest message sent (and accepted) eagerly, at most segment_bytes; 0: never eager.
  /// Unset, it is 256 KiB or segment_bytes, whichever is smaller.
  uint64_t eager_max_bytes = 256ull << 10;
  /// Rx pool buffers reserved per communicator and peer daemon: how many eager messages
  /// that peer may have waiting here for their receive; also how many a communicator's
  /// ranks on this daemon may have staged for each other (in buffers no peer holds).
  uint32_t credits_per_peer = 8;
  /// Rendezvous requests a peer daemon may have waiting here for their receives, per
  /// communicator; one more breaks the communicator (a bound on what a peer can make this
  /// daemon hold).
  uint64_t rendezvous_waiting_per_peer = 65536;
  /// A data session to a peer daemon on which nothing came for this long (or the peer's
  /// own timeout, if shorter) is lost: its communicators' ops fail UNAVAILABLE naming it.
  /// Sessions send heartbeats when idle, so only a peer that hangs, or whose host or
  /// network goes away without a reset, is silent.
  absl::Duration peer_timeout = absl::Seconds(10);
  /// The cluster network's link rate, Gb/s: data sessions on a path whose bandwidth-delay
  /// product exceeds the kernel's TCP autotuning send limit size their send buffer to it.
  /// 0: socket buffers are always left to the kernel.
  uint64_t data_link_gbps = 100;
  /// TCP congestion control of the data sessions (as net.ipv4.tcp_congestion_control
  /// names them, e.g. cubic); empty: the host's. The kernel must offer it.
  std::string data_tcp_congestion;
  /// Largest single buffer a client may allocate.
  uint64_t max_buffer_bytes = 1ull << 30;
  /// Default op deadline; a request may ask for another.
  absl::Duration op_deadline = absl::Seconds(60);
  /// How long JoinCommunicator waits for all ranks by default, and at most (a root daemon
  /// also waits for its ranks at most this).
  absl::Duration join_timeout = absl::Seconds(60);
  /// spdlog level name: trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
  /// How log lines look: "plain" (spdlog's lines) or "json" (one JSON object a line).
  std::string log_format = "plain";
  /// Group owning admin.sock (mode 0660); empty keeps the daemon's own group.
  std::string admin_group;
  /// Tenants in matching order: a caller belongs to the first tenant that lists it.
  std::vector<TenantConfig> tenants = {TenantConfig{.name = "default"}};
  /// The tenant of callers no tenant lists; empty refuses them.
  std::string default_tenant = "default";
  /// How the engine shares itself between tenants: "drr" (weighted deficit round robin)
  /// or "fifo" (arrival order, for comparison).
  std::string scheduler = "drr";
  /// Mutual TLS on the Peer service (PEM files): this daemon's certificate chain, its
  /// private key, and the CA bundle every peer daemon's certificate must chain to. All
  /// three or none; none means plaintext.
  std::string peer_tls_cert_file;
  std::string peer_tls_key_file;
  std::string peer_tls_ca_file;
  /// Algorithm-selection rules (daemon/policy_yaml.h has the form); none: the built-in
  /// selection throughout.
  cclo::v1::Policy policy;
};

/// A log level by its spdlog name; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(const std::string& name);

/// The name ParseLogLevel takes for `level`.
std::string LogLevelName(spdlog::level::level_enum level);

/// Parses YAML text. Unknown keys, wrong types and out-of-range values are
/// INVALID_ARGUMENT naming the key and the value.
absl::StatusOr<Config> ParseConfig(const std::string& yaml_text);

/// Reads and parses a config file. For a `reload`, a file that sets no key (empty, or only
/// comments: most likely one being written) is INVALID_ARGUMENT, as its defaults would
/// replace the running quotas, log settings and policy.
absl::StatusOr<Config> LoadConfig(const std::string& path, bool reload = false);

}  // namespace cclo::daemon
