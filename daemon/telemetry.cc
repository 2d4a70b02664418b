#include "daemon/telemetry.h"

#include <civetweb.h>
#include <netdb.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "hw/process.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

prometheus::ClientMetric Metric(prometheus::MetricType type, double value,
                                std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return metric;
}

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type, double value,
                                std::vector<prometheus::ClientMetric::Label> labels = {}) {
  return {name, help, type, {Metric(type, value, std::move(labels))}};
}

/// Per-tenant families; the labels are bounded by the config (tenant and quota names).
void AddTenants(const cclo::v1::ListTenantsResponse& tenants,
                std::vector<prometheus::MetricFamily>& families) {
  using prometheus::MetricType;
  prometheus::MetricFamily weight{
      "cclod_tenant_weight", "Share of the engine of each tenant.", MetricType::Gauge, {}};
  prometheus::MetricFamily limit{
      "cclod_tenant_quota_limit", "Quota limit of each tenant.", MetricType::Gauge, {}};
  prometheus::MetricFamily used{
      "cclod_tenant_quota_used", "What each tenant holds of a quota.", MetricType::Gauge, {}};
  prometheus::MetricFamily rejections{"cclod_admission_rejections_total",
                                      "Requests refused because a tenant's quota was full.",
                                      MetricType::Counter,
                                      {}};
  prometheus::MetricFamily queued{
      "cclod_tenant_ops_queued", "Ops of each tenant waiting to start.", MetricType::Gauge, {}};
  prometheus::MetricFamily running{
      "cclod_tenant_ops_running", "Ops of each tenant in the engine.", MetricType::Gauge, {}};
  auto add = [](prometheus::MetricFamily& family, double value,
                std::vector<prometheus::ClientMetric::Label> labels) {
    family.metric.push_back(Metric(family.type, value, std::move(labels)));
  };
  for (const cclo::v1::TenantInfo& tenant : tenants.tenants()) {
    add(weight, tenant.weight(), {{"tenant", tenant.name()}});
    add(queued, static_cast<double>(tenant.ops_queued()), {{"tenant", tenant.name()}});
    add(running, static_cast<double>(tenant.ops_running()), {{"tenant", tenant.name()}});
    for (const cclo::v1::QuotaUse& quota : tenant.quotas()) {
      const std::vector<prometheus::ClientMetric::Label> labels = {{"tenant", tenant.name()},
                                                                   {"quota", quota.name()}};
      add(limit, static_cast<double>(quota.limit()), labels);
      add(used, static_cast<double>(quota.used()), labels);
      add(rejections, static_cast<double>(quota.refusals()), labels);
    }
  }
  for (prometheus::MetricFamily* family :
       {&weight, &limit, &used, &rejections, &queued, &running}) {
    families.push_back(std::move(*family));
  }
}

prometheus::ClientMetric HistogramMetric(const Histogram& histogram,
                                         std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.histogram.sample_count = histogram.count;
  metric.histogram.sample_sum = histogram.sum_seconds;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < Histogram::Bounds().size(); ++i) {
    cumulative += histogram.counts[i];
    metric.histogram.bucket.push_back({cumulative, Histogram::Bounds()[i]});
  }
  return metric;  // the exposition adds the +Inf bucket (sample_count)
}

/// Families of the ops that ended, and of the ops in flight now.
void AddOps(const OpTotals& totals, const cclo::v1::ListTenantsResponse& tenants,
            std::vector<prometheus::MetricFamily>& families) {
  using prometheus::MetricType;
  prometheus::MetricFamily ops{"cclod_ops_total",
                               "Ops that ended, by tenant, collective, algorithm that ran "
                               "(none: ended before one was chosen), protocol and result.",
                               MetricType::Counter,
                               {}};
  prometheus::MetricFamily bytes{"cclod_op_bytes_total",
                                 "Payload of the ops that finished OK: one rank's contribution, "
                                 "count times datatype size.",
                                 MetricType::Counter,
                                 {}};
  for (const auto& [key, row] : totals.ops) {
    std::vector<prometheus::ClientMetric::Label> labels = {
        {"tenant", key.tenant},
        {"collective", std::string(hw::CollectiveName(key.collective))},
        {"algorithm", key.algorithm},
        {"protocol", std::string(hw::ProtocolName(key.protocol))}};
    bytes.metric.push_back(Metric(MetricType::Counter, static_cast<double>(row.bytes), labels));
    for (const auto& [result, count] : {std::pair{"ok", row.ok}, std::pair{"error", row.failed}}) {
      std::vector<prometheus::ClientMetric::Label> with_result = labels;
      with_result.push_back({"result", result});
      ops.metric.push_back(
          Metric(MetricType::Counter, static_cast<double>(count), std::move(with_result)));
    }
  }
  prometheus::MetricFamily duration{
      "cclod_op_duration_seconds",
      "Submit to completion of the ops that finished OK, by collective and payload size (at "
      "most 4KiB, 64KiB, 1MiB, 16MiB, or inf: more).",
      MetricType::Histogram,
      {}};
  for (const auto& [key, histogram] : totals.latency) {
    duration.metric.push_back(
        HistogramMetric(histogram, {{"collective", std::string(hw::CollectiveName(key.first))},
                                    {"size", std::string(key.second)}}));
  }
  prometheus::MetricFamily queue_wait{
      "cclod_op_queue_wait_seconds",
      "Submit to hand-over to the engine (waiting for the ops it depends on and earlier ops of "
      "its communicator handle), by tenant.",
      MetricType::Histogram,
      {}};
  for (const auto& [tenant, histogram] : totals.queue_wait) {
    queue_wait.metric.push_back(HistogramMetric(histogram, {{"tenant", tenant}}));
  }
  prometheus::MetricFamily errors{"cclod_op_errors_total",
                                  "Ops that ended with an error, by status code.",
                                  MetricType::Counter,
                                  {}};
  for (const auto& [code, count] : totals.errors) {
    errors.metric.push_back(Metric(MetricType::Counter, static_cast<double>(count),
                                   {{"reason", StatusCodeLabel(code)}}));
  }
  prometheus::MetricFamily refused{
      "cclod_submits_refused_total",
      "Submits refused before an op existed (bad fields, unknown references, a full quota, a "
      "drain), by status code.",
      MetricType::Counter,
      {}};
  for (const auto& [code, count] : totals.refused) {
    refused.metric.push_back(Metric(MetricType::Counter, static_cast<double>(count),
                                    {{"reason", StatusCodeLabel(code)}}));
  }
  uint64_t in_flight = 0;
  for (const cclo::v1::TenantInfo& tenant : tenants.tenants()) {
    in_flight += tenant.ops_queued() + tenant.ops_running();
  }
  families.push_back(std::move(ops));
  families.push_back(std::move(bytes));
  families.push_back(std::move(duration));
  families.push_back(std::move(queue_wait));
  families.push_back(std::move(errors));
  families.push_back(std::move(refused));
  families.push_back(Family("cclod_ops_in_flight",
                            "Ops submitted that have not ended: waiting to start or in the engine.",
                            MetricType::Gauge, static_cast<double>(in_flight)));
}

/// Logs the first failure of each kind: a scrape every few seconds would repeat it.
void WarnOnce(std::atomic<bool>& warned, const absl::Status& status) {
  if (!warned.exchange(true)) {
    spdlog::warn("metrics: {}; left out of the exposition", status.ToString());
  }
}

/// Prometheus's standard process metrics, of cclod itself: what its descriptor and thread
/// limits and its memory are measured against. Out of descriptors (EMFILE), process_open_fds
/// is the limit (the count from /proc needs one on kernels before 6.2).
void AddProcess(std::vector<prometheus::MetricFamily>& families) {
  using prometheus::MetricType;
  static std::atomic<bool> stat_warned{false}, start_warned{false}, fds_warned{false};
  if (absl::StatusOr<hw::ProcessStat> stat = hw::ReadProcessStat(getpid()); !stat.ok()) {
    WarnOnce(stat_warned, stat.status());
  } else {
    families.push_back(Family("process_cpu_seconds_total",
                              "Total user and system CPU time spent in seconds.",
                              MetricType::Counter, stat->cpu_seconds));
    families.push_back(Family("process_threads", "Number of OS threads in the process.",
                              MetricType::Gauge, static_cast<double>(stat->threads)));
    families.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              MetricType::Gauge, static_cast<double>(stat->virtual_bytes)));
    families.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                              MetricType::Gauge, static_cast<double>(stat->resident_bytes)));
    if (absl::StatusOr<double> start = hw::StartTimeSeconds(stat->start_ticks); !start.ok()) {
      WarnOnce(start_warned, start.status());
    } else {
      families.push_back(Family("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds.",
                                MetricType::Gauge, *start));
    }
  }
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  absl::StatusOr<uint64_t> open = hw::OpenDescriptors(getpid());
  if (open.status().code() == absl::StatusCode::kResourceExhausted) open = limit.rlim_cur;
  if (!open.ok()) {
    WarnOnce(fds_warned, open.status());
  } else {
    families.push_back(Family("process_open_fds", "Number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(*open)));
  }
  families.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                            MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
}

class StatusCollectable : public prometheus::Collectable {
 public:
  explicit StatusCollectable(SnapshotFn snapshot) : snapshot_(std::move(snapshot)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    const Snapshot snapshot = snapshot_();
    const cclo::v1::StatusResponse& s = snapshot.status;
    std::vector<prometheus::MetricFamily> families = {
        Family("cclod_build_info",
               "Build of the running cclod, and the protocol versions it speaks.",
               MetricType::Gauge, 1,
               {{"version", s.version()},
                {"data_wire_version", absl::StrCat(s.data_wire_version())},
                {"selection_version", absl::StrCat(s.selection_version())},
                {"attach_version", absl::StrCat(s.attach_version())},
                {"ring_version", absl::StrCat(s.ring_version())}}),
        Family("cclod_uptime_seconds", "Seconds since the daemon started.", MetricType::Gauge,
               static_cast<double>(s.uptime_seconds())),
        Family("cclod_sessions", "Attached client sessions.", MetricType::Gauge, s.sessions()),
        Family("cclod_communicators", "Communicators with a local rank.", MetricType::Gauge,
               s.communicators()),
        Family("cclod_buffers",
               "Shared-memory buffers of attached clients, with those freed that an op still "
               "uses.",
               MetricType::Gauge, s.buffers()),
        Family("cclod_buffer_bytes", "Bytes of the buffers cclod_buffers counts.",
               MetricType::Gauge, static_cast<double>(s.buffer_bytes())),
        Family("cclod_ops_completed_total", "Engine calls finished successfully.",
               MetricType::Counter, static_cast<double>(s.ops_completed())),
        Family("cclod_ops_failed_total", "Engine calls finished with an error.",
               MetricType::Counter, static_cast<double>(s.ops_failed())),
        Family("cclod_bytes_sent_total", "Bytes sent to other ranks.", MetricType::Counter,
               static_cast<double>(s.bytes_sent())),
        Family("cclod_bytes_received_total", "Bytes received from other ranks.",
               MetricType::Counter, static_cast<double>(s.bytes_received())),
        Family("cclod_rx_pool_bytes", "Size of the eager receive pool.", MetricType::Gauge,
               static_cast<double>(s.rx_pool_bytes_total())),
        Family("cclod_rx_pool_used_bytes", "Bytes of the eager receive pool in use.",
               MetricType::Gauge, static_cast<double>(s.rx_pool_bytes_used())),
        Family("cclod_rx_pool_peak_bytes",
               "Most bytes of the eager receive pool in use at once since the start: the "
               "pool's memory the daemon has taken and keeps.",
               MetricType::Gauge, static_cast<double>(s.rx_pool_bytes_peak())),
        Family("cclod_scratch_bytes",
               "Scratch memory the engine's running calls may hold in all (scratch_max_bytes).",
               MetricType::Gauge, static_cast<double>(s.scratch_bytes_limit())),
        Family("cclod_scratch_used_bytes", "Scratch memory the engine's running calls hold.",
               MetricType::Gauge, static_cast<double>(s.scratch_bytes_used())),
        Family("cclod_scratch_kept_bytes",
               "Scratch memory of finished calls the engine keeps for the calls after them.",
               MetricType::Gauge, static_cast<double>(s.scratch_bytes_kept())),
        Family("cclod_data_sessions_up",
               "Peer engines of communicators whose data sessions (one each way) are up.",
               MetricType::Gauge, static_cast<double>(s.data_sessions_up())),
        Family("cclod_wire_errors_total", "Invalid segments or handshakes rejected.",
               MetricType::Counter, static_cast<double>(s.wire_errors())),
        {"cclod_accept_pauses_total",
         "Times accepting paused for 100 ms after an accept (or the wait for one) failed, out "
         "of descriptors or memory, say, by socket: data (the data port), attach, client, admin "
         "or peer (the peer port).",
         MetricType::Counter,
         {Metric(MetricType::Counter, static_cast<double>(s.accept_pauses_data()),
                 {{"socket", "data"}}),
          Metric(MetricType::Counter, static_cast<double>(s.accept_pauses_attach()),
                 {{"socket", "attach"}}),
          Metric(MetricType::Counter, static_cast<double>(s.accept_pauses_client()),
                 {{"socket", "client"}}),
          Metric(MetricType::Counter, static_cast<double>(s.accept_pauses_admin()),
                 {{"socket", "admin"}}),
          Metric(MetricType::Counter, static_cast<double>(s.accept_pauses_peer()),
                 {{"socket", "peer"}})}},
        Family("cclod_join_retries_total",
               "Times a join of this daemon's ranks tried again: its root daemon reset the "
               "connection unread.",
               MetricType::Counter, static_cast<double>(s.join_retries())),
        Family("cclod_engine_turn_bytes",
               "Bytes each data session reads and writes per engine turn: 1 MiB, or 64 KiB "
               "while two or more tenants have had engine work within the last 50 ms.",
               MetricType::Gauge, static_cast<double>(s.engine_turn_bytes())),
        Family("cclod_policy_version",
               "Version of the policy new communicators choose algorithms by.", MetricType::Gauge,
               static_cast<double>(s.policy_version())),
        Family("cclod_draining", "1 while a drain runs (new work refused), else 0.",
               MetricType::Gauge, s.draining() ? 1 : 0),
        {"cclod_config_reloads_total",
         "Config reloads (SIGHUP) since start, by result: applied, or rejected (the running "
         "config stayed).",
         MetricType::Counter,
         {Metric(MetricType::Counter, static_cast<double>(s.reloads_applied()),
                 {{"result", "applied"}}),
          Metric(MetricType::Counter, static_cast<double>(s.reloads_rejected()),
                 {{"result", "rejected"}})}},
        Family("cclod_config_reload_rejected",
               "1 while the last config reload was rejected (the file is not the running "
               "config, and a start reads it), else 0.",
               MetricType::Gauge, s.reload_error().empty() ? 0 : 1),
    };
    AddTenants(snapshot.tenants, families);
    AddOps(snapshot.ops, snapshot.tenants, families);
    prometheus::MetricFamily peer_sessions{
        "cclod_peer_sessions",
        "Peer engines of the communicators, by the state of their data sessions (one each way): "
        "connecting (not both up yet), up, left (the peer left the communicator) or lost (a "
        "failure, or the communicator broke).",
        MetricType::Gauge,
        {}};
    for (const auto& [state, count] : snapshot.peer_sessions) {
      peer_sessions.metric.push_back(
          Metric(MetricType::Gauge, static_cast<double>(count), {{"state", state}}));
    }
    families.push_back(std::move(peer_sessions));
    families.push_back(Family("cclod_peer_sessions_lost_total",
                              "Peer engines whose data sessions were lost (a failure: reset, "
                              "heartbeat missed, no goodbye), whether or not their communicators "
                              "still exist.",
                              MetricType::Counter,
                              static_cast<double>(snapshot.peer_sessions_lost_total)));
    AddProcess(families);
    return families;
  }

 private:
  const SnapshotFn snapshot_;
};

/// Opens and closes a connection to `listener`, which wakes the HTTP server's wait for one.
void Knock(const addrinfo& listener) {
  const int fd = socket(listener.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, listener.ai_addr, listener.ai_addrlen);  // refused once the server has closed
  close(fd);
}

}  // namespace

absl::Status MetricsServer::CheckHost(const std::string& host, uint16_t port) {
  const std::string where = absl::StrCat("cannot serve metrics on ", hw::HostPort(host, port));
  auto lookup = [&](int family) {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (rc == 0) {
      freeaddrinfo(found);
      return absl::OkStatus();
    }
    const absl::Status failed = hw::ResolveFailure(host, rc);
    return absl::Status(failed.code(), absl::StrCat(where, ": ", failed.message()));
  };
  if (absl::Status any = lookup(AF_UNSPEC); !any.ok()) return any;
  // Debian's civetweb is built without IPv6.
  constexpr unsigned kCivetwebIpv6 = 8;
  if (mg_check_feature(kCivetwebIpv6) != 0) return absl::OkStatus();
  // A resolver failing for now may find an IPv4 address at a later start.
  if (absl::Status ipv4 = lookup(AF_INET); ipv4.ok() || absl::IsUnavailable(ipv4)) return ipv4;
  return absl::InvalidArgumentError(absl::StrCat(
      where, host.find(':') == std::string::npos ? ", a name with only IPv6 addresses" : "",
      ": the HTTP server (civetweb) was built without IPv6; set metrics_host to an IPv4 "
      "address"));
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host,
                                                                    uint16_t port,
                                                                    SnapshotFn snapshot) {
  if (absl::Status usable = CheckHost(host, port); !usable.ok()) return usable;
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    // A scraper sends its request at once. A connection that has not sent it within 2 s
    // (idle, or slow on purpose) is closed, so that a few of them cannot hold every worker for
    // civetweb's default 30 s and fail the real scrapes.
    server->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", hw::HostPort(host, port), "num_threads", "4",
                                 "request_timeout_ms", "2000"});
  } catch (const std::exception& error) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", hw::HostPort(host, port), ": ", error.what()));
  }
  auto collectable = std::make_shared<StatusCollectable>(std::move(snapshot));
  // civetweb takes a handler's path as a prefix ("/metricsx" and "/metrics/a" would answer);
  // a trailing $ makes it the path itself.
  server->exposer_->RegisterCollectable(collectable, "/metrics$");
  server->collectable_ = collectable;
  std::vector<int> ports = server->exposer_->GetListeningPorts();
  server->port_ = ports.empty() ? port : static_cast<uint16_t>(ports.front());
  server->host_ = host;
  server->address_ = hw::HostPort(host, server->port_);
  return server;
}

MetricsServer::~MetricsServer() {
  // civetweb looks at its stop flag between waits for a connection of up to 2 s
  // (SOCKET_TIMEOUT_QUANTUM as Debian builds it): a connection ends the wait, so that the
  // server stops at once instead of within 2 s (a daemon's every stop).
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* listener = nullptr;
  if (getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &listener) != 0) {
    listener = nullptr;
  }
  std::atomic<bool> stopped = false;
  std::thread stop;
  auto stop_exposer = [&] {
    exposer_.reset();
    stopped = true;
  };
  // No thread to be had (cclod's user at its process limit): stop within the 2 s here.
  if (!hw::StartThread(stop, "the metrics server's stop", stop_exposer).ok()) stop_exposer();
  while (!stopped) {
    if (listener != nullptr) Knock(*listener);
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (stop.joinable()) stop.join();
  if (listener != nullptr) freeaddrinfo(listener);
}

}  // namespace cclo::daemon
