#include "daemon/config.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/policy.h"
#include "daemon/policy_yaml.h"
#include "daemon/yaml_key.h"
#include "hw/poe/handshake.h"
#include "hw/poe/tcp/engine.h"
#include "hw/poe/wire.h"
#include "spdlog/spdlog.h"
#include "yaml-cpp/yaml.h"

namespace cclo::daemon {
namespace {

using Setter = std::function<absl::Status(const YAML::Node&, Config&)>;

/// `node` as a string; a list or a mapping is INVALID_ARGUMENT naming `key`.
absl::StatusOr<std::string> Text(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key '", key, "': cannot read '", YAML::Dump(node), "' as a string"));
  }
  return node.Scalar();
}

/// `node` as a whole number in [min, max], `what` naming it in the message. Only decimal
/// digits are taken (no sign, no leading 0): yaml-cpp would read 010 as octal, 0x10 as hex.
absl::StatusOr<uint64_t> Whole(const YAML::Node& node, uint64_t min, uint64_t max,
                               const char* what = "a whole number") {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  const bool decimal = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos &&
                       (text.size() == 1 || text[0] != '0');
  uint64_t value = 0;
  if (decimal && absl::SimpleAtoi(text, &value) && value >= min && value <= max) return value;
  return absl::InvalidArgumentError(
      absl::StrCat("'", YAML::Dump(node), "' is not ", what, " in [", min, ", ", max, "]",
                   decimal ? "" : " written in decimal digits (no sign, no leading 0, no 0x)"));
}

Setter String(std::string Config::*field) {
  return [field](const YAML::Node& node, Config& config) -> absl::Status {
    if (!node.IsScalar()) return absl::InvalidArgumentError("expected a string");
    config.*field = node.Scalar();
    return absl::OkStatus();
  };
}

template <typename T>
Setter Number(T Config::*field, uint64_t min, uint64_t max) {
  return [field, min, max](const YAML::Node& node, Config& config) -> absl::Status {
    absl::StatusOr<uint64_t> value = Whole(node, min, max);
    if (!value.ok()) return value.status();
    config.*field = static_cast<T>(*value);
    return absl::OkStatus();
  };
}

Setter Millis(absl::Duration Config::*field, uint64_t min_ms = 1) {
  return [field, min_ms](const YAML::Node& node, Config& config) -> absl::Status {
    absl::StatusOr<uint64_t> value = Whole(node, min_ms, 86'400'000, "a duration in milliseconds");
    if (!value.ok()) return value.status();
    config.*field = absl::Milliseconds(*value);
    return absl::OkStatus();
  };
}

/// A list under `key`, each item read by `read`.
template <typename T>
absl::Status List(const YAML::Node& node, const std::string& key, std::vector<T>& out,
                  const std::function<absl::StatusOr<T>(const YAML::Node&)>& read) {
  if (!node.IsSequence())
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be a list"));
  for (const YAML::Node& item : node) {
    absl::StatusOr<T> value = read(item);
    if (!value.ok()) return value.status();
    out.push_back(*std::move(value));
  }
  return absl::OkStatus();
}

/// A whole number in [min, max] under `key` of a tenant entry.
template <typename T>
absl::Status Bounded(const YAML::Node& node, const std::string& key, uint64_t min, uint64_t max,
                     T& out) {
  absl::StatusOr<uint64_t> value = Whole(node, min, max);
  if (!value.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("'", key, "': ", value.status().message()));
  }
  out = static_cast<T>(*value);
  return absl::OkStatus();
}

absl::Status ParseQuotas(const YAML::Node& node, TenantQuotas& quotas) {
  if (!node.IsMap()) return absl::InvalidArgumentError("'quotas' must be a mapping");
  std::set<std::string> seen;
  for (const auto& entry : node) {
    absl::StatusOr<std::string> name = YamlKey(entry.first);
    if (!name.ok()) return name.status();
    const std::string& key = *name;
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("quota '", key, "' is given twice"));
    }
    absl::Status status;
    if (key == "buffer_bytes") {
      status = Bounded(entry.second, key, 0, 1ull << 48, quotas.buffer_bytes);
    } else if (key == "communicators") {
      status = Bounded(entry.second, key, 0, 1u << 20, quotas.communicators);
    } else if (key == "inflight_ops") {
      status = Bounded(entry.second, key, 0, 1u << 20, quotas.inflight_ops);
    } else if (key == "sessions") {
      status = Bounded(entry.second, key, 0, 1u << 20, quotas.sessions);
    } else if (key == "buffers") {
      status = Bounded(entry.second, key, 0, 1u << 20, quotas.buffers);
    } else if (key == "scratch_bytes") {
      status = Bounded(entry.second, key, 0, 1ull << 48, quotas.scratch_bytes);
    } else if (key == "waiting_calls") {
      status = Bounded(entry.second, key, 0, 1u << 20, quotas.waiting_calls);
    } else {
      status = absl::InvalidArgumentError(
          absl::StrCat("unknown quota '", key,
                       "'; valid: buffer_bytes, buffers, communicators, inflight_ops, "
                       "scratch_bytes, sessions, waiting_calls"));
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<TenantConfig> ParseTenant(const YAML::Node& node) {
  if (!node.IsMap()) return absl::InvalidArgumentError("a tenant must be a mapping");
  TenantConfig tenant;
  std::set<std::string> seen;
  for (const auto& entry : node) {
    absl::StatusOr<std::string> name = YamlKey(entry.first);
    if (!name.ok()) return name.status();
    const std::string& key = *name;
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("tenant key '", key, "' is given twice"));
    }
    absl::Status status;
    if (key == "name") {
      absl::StatusOr<std::string> name = Text(entry.second, key);
      if (!name.ok()) return name.status();
      tenant.name = *name;
    } else if (key == "uids") {
      status = List<uint32_t>(entry.second, key, tenant.uids,
                              [&key](const YAML::Node& item) -> absl::StatusOr<uint32_t> {
                                uint32_t uid = 0;
                                absl::Status read = Bounded(item, key, 0, UINT32_MAX, uid);
                                if (!read.ok()) return read;
                                return uid;
                              });
    } else if (key == "users" || key == "groups") {
      status = List<std::string>(entry.second, key, key == "users" ? tenant.users : tenant.groups,
                                 [&key](const YAML::Node& item) { return Text(item, key); });
    } else if (key == "weight") {
      status = Bounded(entry.second, key, 1, 1000, tenant.weight);
    } else if (key == "quotas") {
      status = ParseQuotas(entry.second, tenant.quotas);
    } else {
      status = absl::InvalidArgumentError(absl::StrCat(
          "unknown tenant key '", key, "'; valid: name, uids, users, groups, weight, quotas"));
    }
    if (!status.ok()) return status;
  }
  const bool valid_name =
      !tenant.name.empty() && tenant.name.size() <= 32 &&
      tenant.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
  if (!valid_name) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tenant name '", tenant.name, "' is not 1 to 32 characters of a-z, 0-9, _ and -"));
  }
  return tenant;
}

absl::Status ParseTenants(const YAML::Node& node, Config& config) {
  if (!node.IsSequence() || node.size() == 0) {
    return absl::InvalidArgumentError("expected a non-empty list of tenants");
  }
  config.tenants.clear();
  std::map<std::string, std::string> claimed;  // "uid 5", "user bob", "group ml" -> tenant
  for (size_t i = 0; i < node.size(); ++i) {
    absl::StatusOr<TenantConfig> tenant = ParseTenant(node[i]);
    if (!tenant.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tenant ", i, ": ", tenant.status().message()));
    }
    std::vector<std::string> identities;
    for (uint32_t uid : tenant->uids) identities.push_back(absl::StrCat("uid ", uid));
    for (const std::string& user : tenant->users) identities.push_back("user " + user);
    for (const std::string& group : tenant->groups) identities.push_back("group " + group);
    for (const std::string& identity : identities) {
      auto [owner, inserted] = claimed.emplace(identity, tenant->name);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            identity, " is listed by tenants '", owner->second, "' and '", tenant->name, "'"));
      }
    }
    for (const TenantConfig& earlier : config.tenants) {
      if (earlier.name == tenant->name) {
        return absl::InvalidArgumentError(
            absl::StrCat("tenant '", tenant->name, "' is listed twice"));
      }
    }
    config.tenants.push_back(*std::move(tenant));
  }
  return absl::OkStatus();
}

const std::map<std::string, Setter>& Setters() {
  static const auto* setters = new std::map<std::string, Setter>{
      {"runtime_dir", String(&Config::runtime_dir)},
      {"host", String(&Config::host)},
      {"peer_port", Number(&Config::peer_port, 0, 65535)},
      {"data_port", Number(&Config::data_port, 0, 65535)},
      {"metrics_host", String(&Config::metrics_host)},
      {"metrics_port", Number(&Config::metrics_port, 0, 65535)},
      {"rx_pool_bytes", Number(&Config::rx_pool_bytes, 1 << 16, 1ull << 36)},
      {"scratch_max_bytes", Number(&Config::scratch_max_bytes, 1 << 20, 1ull << 48)},
      {"segment_bytes",
       Number(&Config::segment_bytes, hw::poe::kMinSegmentBytes, hw::poe::kMaxSegmentBytes)},
      {"eager_max_bytes", Number(&Config::eager_max_bytes, 0, hw::poe::kMaxSegmentBytes)},
      {"credits_per_peer", Number(&Config::credits_per_peer, 0, hw::poe::kMaxCredits)},
      {"rendezvous_waiting_per_peer", Number(&Config::rendezvous_waiting_per_peer, 1, 1u << 24)},
      {"peer_timeout_ms", Millis(&Config::peer_timeout, hw::poe::kMinPeerTimeoutMs)},
      {"data_link_gbps", Number(&Config::data_link_gbps, 0, 100000)},
      {"data_tcp_congestion", String(&Config::data_tcp_congestion)},
      {"max_buffer_bytes", Number(&Config::max_buffer_bytes, 4096, 1ull << 40)},
      {"op_deadline_ms", Millis(&Config::op_deadline)},
      {"join_timeout_ms", Millis(&Config::join_timeout)},
      {"log_level", String(&Config::log_level)},
      {"log_format", String(&Config::log_format)},
      {"admin_group", String(&Config::admin_group)},
      {"tenants", ParseTenants},
      {"default_tenant", String(&Config::default_tenant)},
      {"scheduler", String(&Config::scheduler)},
      {"peer_tls_cert_file", String(&Config::peer_tls_cert_file)},
      {"peer_tls_key_file", String(&Config::peer_tls_key_file)},
      {"peer_tls_ca_file", String(&Config::peer_tls_ca_file)},
      {"policy",
       [](const YAML::Node& node, Config& config) -> absl::Status {
         absl::StatusOr<cclo::v1::Policy> policy = ParsePolicy(node);
         if (!policy.ok()) return policy.status();
         config.policy = *std::move(policy);
         return absl::OkStatus();
       }},
  };
  return *setters;
}

/// The peer TLS files go together: all three set, or none.
absl::Status CheckPeerTls(const Config& config) {
  const std::pair<const char*, const std::string*> files[] = {
      {"peer_tls_cert_file", &config.peer_tls_cert_file},
      {"peer_tls_key_file", &config.peer_tls_key_file},
      {"peer_tls_ca_file", &config.peer_tls_ca_file}};
  std::vector<std::string> set, unset;
  for (const auto& [key, path] : files) {
    if (path->empty()) {
      unset.push_back(key);
    } else {
      set.push_back(absl::StrCat(key, " is '", *path, "'"));
    }
  }
  if (set.empty() || unset.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "config: peer TLS needs peer_tls_cert_file, peer_tls_key_file and peer_tls_ca_file "
      "together; ",
      absl::StrJoin(set, ", "), " but ", absl::StrJoin(unset, " and "),
      unset.size() == 1 ? " is" : " are", " not set"));
}

/// A congestion control's name, or empty for the host's. Whether the kernel offers it
/// shows when the data port opens.
absl::Status CheckCongestionName(const std::string& name) {
  if (name.empty() || hw::poe::tcp::IsCongestionName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "'", name, "' is not a congestion control name (up to 15 letters, digits or '_')"));
}

/// `host` is what other daemons dial (rank tables and communicator tokens carry it): a name
/// or an IPv4 or IPv6 address, not the unspecified 0.0.0.0 or ::, which they cannot dial.
absl::Status CheckHost(const std::string& host) {
  if (host.empty()) {
    return absl::InvalidArgumentError("is empty; give this node's address on the cluster network");
  }
  // Joining daemons refuse other bytes in a token or a rank table (hw::CheckHostPort), and
  // an answer's string field cannot carry a byte that is not UTF-8 (`ccloctl status`).
  if (!hw::PrintableWithoutSpaces(host)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", host,
                     "' is not printable ASCII without spaces: rank tables and communicator "
                     "tokens carry host, and other daemons refuse any other address"));
  }
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) {
    // Not an address, so a name, resolved at start; a name has no ':', '[' or ']'.
    if (host.find_first_of(":[]") == std::string::npos) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("'", host, "' is not an IPv6 address (write one without brackets, e.g. ::1)"));
  }
  bool unspecified;
  bool unscoped = false;
  if (found->ai_family == AF_INET6) {
    const auto* socket_address = reinterpret_cast<const sockaddr_in6*>(found->ai_addr);
    const in6_addr& address = socket_address->sin6_addr;
    // ::ffff:0.0.0.0 binds as 0.0.0.0 does.
    unspecified = IN6_IS_ADDR_UNSPECIFIED(&address) ||
                  (IN6_IS_ADDR_V4MAPPED(&address) && address.s6_addr32[3] == 0);
    // A link-local address is one per interface: no socket binds or dials it without one.
    unscoped = IN6_IS_ADDR_LINKLOCAL(&address) && socket_address->sin6_scope_id == 0;
  } else {
    unspecified = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr.s_addr == 0;
  }
  freeaddrinfo(found);
  if (unscoped) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", host, "' is a link-local address without its interface; write it with one, as ", host,
        "%eth0 (other daemons dial it through their interface of that name)"));
  }
  if (!unspecified) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "'", host, "' is the unspecified address, which other daemons cannot dial (rank tables ",
      "and communicator tokens carry host); give this node's address on the cluster network"));
}

}  // namespace

std::string LogLevelName(spdlog::level::level_enum level) {
  // spdlog's own names say "warning"; the config says "warn".
  static const char* const kNames[] = {"trace", "debug",    "info", "warn",
                                       "error", "critical", "off"};
  const auto index = static_cast<size_t>(level);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(const std::string& name) {
  const spdlog::level::level_enum level = spdlog::level::from_str(name);
  // from_str answers "off" for any name it does not know.
  if (level == spdlog::level::off && name != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not one of trace, debug, info, warn, error, critical, off"));
  }
  return level;
}

absl::StatusOr<Config> ParseConfig(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("config is not valid YAML: ", error.what()));
  }
  Config config;
  if (root.IsNull()) return config;
  if (!root.IsMap()) return absl::InvalidArgumentError("config must be a YAML mapping");
  std::set<std::string> seen;
  for (const auto& entry : root) {
    absl::StatusOr<std::string> name = YamlKey(entry.first);
    if (!name.ok())
      return absl::InvalidArgumentError(absl::StrCat("config ", name.status().message()));
    const std::string& key = *name;
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("config key '", key, "' is given twice"));
    }
    auto setter = Setters().find(key);
    if (setter == Setters().end()) {
      std::string valid;
      for (const auto& [name, unused] : Setters()) {
        absl::StrAppend(&valid, valid.empty() ? "" : ", ", name);
      }
      return absl::InvalidArgumentError(
          absl::StrCat("unknown config key '", key, "'; valid keys: ", valid));
    }
    absl::Status status = setter->second(entry.second, config);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config key '", key, "': ", status.message()));
    }
  }
  if (absl::StatusOr<spdlog::level::level_enum> level = ParseLogLevel(config.log_level);
      !level.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key 'log_level': ", level.status().message()));
  }
  if (config.log_format != "plain" && config.log_format != "json") {
    return absl::InvalidArgumentError(absl::StrCat("config key 'log_format': '", config.log_format,
                                                   "' is not one of plain, json"));
  }
  if (config.segment_bytes % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config key 'segment_bytes': ", config.segment_bytes, " is not a multiple of 8"));
  }
  if (config.segment_bytes > config.rx_pool_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("config: segment_bytes ", config.segment_bytes,
                                                   " exceeds rx_pool_bytes ",
                                                   config.rx_pool_bytes));
  }
  if (!root["eager_max_bytes"]) {
    config.eager_max_bytes = std::min(config.eager_max_bytes, config.segment_bytes);
  } else if (config.eager_max_bytes > config.segment_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("config: eager_max_bytes ", config.eager_max_bytes, " exceeds segment_bytes ",
                     config.segment_bytes, " (an eager message travels as one segment)"));
  }
  // Two servers on one address and port: the second bind fails at every start, so refuse it
  // here as a bad config (exit code 2, not retried) naming both keys.
  std::vector<std::pair<const char*, uint16_t>> ports = {{"peer_port", config.peer_port},
                                                         {"data_port", config.data_port}};
  if (config.metrics_host.empty() || config.metrics_host == config.host) {
    ports.push_back({"metrics_port", config.metrics_port});
  }
  for (size_t i = 0; i < ports.size(); ++i) {
    for (size_t j = i + 1; j < ports.size(); ++j) {
      if (ports[i].second != 0 && ports[i].second == ports[j].second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config keys '", ports[i].first, "' and '", ports[j].first, "' are both ",
            ports[i].second, " on host ", config.host, ": each server needs a port of its own"));
      }
    }
  }
  if (absl::Status tls = CheckPeerTls(config); !tls.ok()) return tls;
  if (absl::Status congestion = CheckCongestionName(config.data_tcp_congestion); !congestion.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key 'data_tcp_congestion': ", congestion.message()));
  }
  if (config.runtime_dir.empty()) {
    return absl::InvalidArgumentError(
        "config key 'runtime_dir': is empty; give the dir of cclod's sockets (as /run/cclod)");
  }
  // Its longest socket path must fit a Unix socket's address, or every start fails to bind
  // it (exit code 1, which the unit retries) and a reload would take it.
  if (const std::string socket = config.runtime_dir + "/attach.sock";
      socket.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config key 'runtime_dir': '", config.runtime_dir, "' is too long: socket path '", socket,
        "' has ", socket.size(), " bytes; at most ", sizeof(sockaddr_un::sun_path) - 1, " fit"));
  }
  if (absl::Status host = CheckHost(config.host); !host.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config key 'host': ", host.message()));
  }
  if (config.scheduler != "drr" && config.scheduler != "fifo") {
    return absl::InvalidArgumentError(
        absl::StrCat("config key 'scheduler': '", config.scheduler, "' is not one of drr, fifo"));
  }
  std::vector<std::string> tenants;
  for (const TenantConfig& tenant : config.tenants) tenants.push_back(tenant.name);
  if (absl::Status known = CheckPolicyTenants(config.policy, tenants); !known.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config key 'policy': ", known.message()));
  }
  if (!config.default_tenant.empty() &&
      std::find(tenants.begin(), tenants.end(), config.default_tenant) == tenants.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config key 'default_tenant': '", config.default_tenant, "' names no tenant (tenants: ",
        absl::StrJoin(tenants, ", "), "); '' refuses unknown callers"));
  }
  return config;
}

absl::StatusOr<Config> LoadConfig(const std::string& path, bool reload) {
  absl::StatusOr<std::string> text = hw::ReadTextFile("config file", path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Config> config = ParseConfig(*text);
  // It parsed, so it loads.
  if (reload && config.ok() && YAML::Load(*text).IsNull()) {
    return absl::InvalidArgumentError(
        "the file sets no key (it is empty or holds only comments, as a file being written "
        "may); write the new config beside it and rename it over this one");
  }
  return config;
}

}  // namespace cclo::daemon
