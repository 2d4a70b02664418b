#include "daemon/telemetry.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include "absl/strings/str_cat.h"

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

class StatusCollectable : public prometheus::Collectable {
 public:
  explicit StatusCollectable(SnapshotFn snapshot) : snapshot_(std::move(snapshot)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    const Snapshot snapshot = snapshot_();
    const cclo::v1::StatusResponse& s = snapshot.status;
    std::vector<prometheus::MetricFamily> families = {
        Family("cclod_build_info", "Build of the running cclod.", MetricType::Gauge, 1,
               {{"version", s.version()}}),
        Family("cclod_uptime_seconds", "Seconds since the daemon started.", MetricType::Gauge,
               static_cast<double>(s.uptime_seconds())),
        Family("cclod_sessions", "Attached client sessions.", MetricType::Gauge, s.sessions()),
        Family("cclod_communicators", "Communicators with a local rank.", MetricType::Gauge,
               s.communicators()),
        Family("cclod_buffers", "Shared-memory buffers allocated.", MetricType::Gauge, s.buffers()),
        Family("cclod_buffer_bytes", "Bytes of shared-memory buffers allocated.", MetricType::Gauge,
               static_cast<double>(s.buffer_bytes())),
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
        Family("cclod_data_sessions_up", "Data sessions to peer engines that are up.",
               MetricType::Gauge, static_cast<double>(s.data_sessions_up())),
        Family("cclod_wire_errors_total", "Invalid segments or handshakes rejected.",
               MetricType::Counter, static_cast<double>(s.wire_errors())),
        Family("cclod_policy_version",
               "Version of the policy new communicators choose algorithms by.",
               MetricType::Gauge, static_cast<double>(s.policy_version())),
        Family("cclod_draining", "1 while a drain runs (new work refused), else 0.",
               MetricType::Gauge, s.draining() ? 1 : 0),
    };
    AddTenants(snapshot.tenants, families);
    return families;
  }

 private:
  const SnapshotFn snapshot_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host,
                                                                    uint16_t port,
                                                                    SnapshotFn snapshot) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(absl::StrCat(host, ":", port), 2);
  } catch (const std::exception& error) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", host, ":", port, ": ", error.what()));
  }
  auto collectable = std::make_shared<StatusCollectable>(std::move(snapshot));
  server->exposer_->RegisterCollectable(collectable);
  server->collectable_ = collectable;
  std::vector<int> ports = server->exposer_->GetListeningPorts();
  server->port_ = ports.empty() ? port : static_cast<uint16_t>(ports.front());
  return server;
}

MetricsServer::~MetricsServer() = default;

}  // namespace cclo::daemon
