// The shipped monitoring files against a real daemon: promtool accepts its exposition, the
// Grafana dashboard and the alert rules name only metrics it exports, and a real Prometheus
// server with the shipped scrape config scrapes it.
#include <arpa/inet.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

/// Every name the exposition has samples under: the `# TYPE` names, and for histograms
/// and summaries their _bucket, _sum and _count series.
std::set<std::string> ExportedNames(const std::string& exposition) {
  std::set<std::string> names;
  const std::regex type_line(R"(# TYPE (\S+) (\S+))");
  for (std::sregex_iterator it(exposition.begin(), exposition.end(), type_line), end; it != end;
       ++it) {
    const std::string name = (*it)[1];
    names.insert(name);
    if ((*it)[2] == "histogram" || (*it)[2] == "summary") {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) names.insert(name + suffix);
    }
  }
  return names;
}

/// The metric names `text` mentions: cclod's own (cclod_*) and the process_* ones of
/// Prometheus's standard process metrics, which cclod exports of itself.
std::set<std::string> MetricNames(const std::string& text) {
  std::set<std::string> names;
  const std::regex name(R"(\b(cclod|process)_[A-Za-z0-9_]+)");
  for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
    names.insert(it->str());
  }
  return names;
}

/// The object at `key` of a JSON object.
const Struct& Object(const Struct& object, const std::string& key) {
  return object.fields().at(key).struct_value();
}

/// The list at `key` of a JSON object.
const google::protobuf::RepeatedPtrField<Value>& List(const Struct& object,
                                                      const std::string& key) {
  return object.fields().at(key).list_value().values();
}

/// The string at `key` of a JSON object.
const std::string& String(const Struct& object, const std::string& key) {
  return object.fields().at(key).string_value();
}

Struct ParseJson(const std::string& text) {
  Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &parsed).ok()) << text;
  return parsed;
}

TEST(MonitoringTest, PromtoolChecksDaemonExposition) {
  Daemon daemon;
  const std::string exposition = Scrape(daemon);
  ASSERT_NE(exposition.find("cclod_ops_completed_total"), std::string::npos) << exposition;
  const std::string path = TempDir() + "/exposition.txt";
  std::ofstream(path) << exposition;
  const ProcessResult check =
      Process({"/bin/sh", "-c", "exec promtool check metrics < " + path}).Wait(absl::Seconds(60));
  EXPECT_EQ(check.exit_code, 0) << check.output << "\nexposition:\n" << exposition;
}

TEST(MonitoringTest, DashboardQueriesOnlyExportedMetrics) {
  Daemon daemon;
  const std::set<std::string> exported = ExportedNames(Scrape(daemon));
  ASSERT_TRUE(exported.count("cclod_ops_completed_total"));
  const Struct dashboard = ParseJson(ReadFile(Runfile("deploy/grafana/cclod.json")));
  const auto& panels = List(dashboard, "panels");
  ASSERT_FALSE(panels.empty());
  auto check_query = [&](const std::string& where, const std::string& query) {
    const std::set<std::string> names = MetricNames(query);
    EXPECT_FALSE(names.empty()) << where << " names no metric: " << query;
    for (const std::string& name : names) {
      EXPECT_TRUE(exported.count(name))
          << where << " queries " << name << ", which the daemon does not export: " << query;
    }
  };
  for (const Value& panel : panels) {
    const std::string title = String(panel.struct_value(), "title");
    const auto& targets = List(panel.struct_value(), "targets");
    EXPECT_FALSE(targets.empty()) << "panel '" << title << "' has no query";
    for (const Value& target : targets) {
      check_query("panel '" + title + "'", String(target.struct_value(), "expr"));
    }
  }
  for (const Value& variable : List(Object(dashboard, "templating"), "list")) {
    if (String(variable.struct_value(), "type") == "query") {
      check_query("variable " + String(variable.struct_value(), "name"),
                  String(variable.struct_value(), "definition"));
    }
  }
}

TEST(MonitoringTest, AlertRulesNameOnlyExportedMetrics) {
  Daemon daemon;
  const std::set<std::string> exported = ExportedNames(Scrape(daemon));
  const std::set<std::string> named =
      MetricNames(ReadFile(Runfile("deploy/prometheus/alerts.yml")));
  EXPECT_FALSE(named.empty());
  for (const std::string& name : named) {
    EXPECT_TRUE(exported.count(name)) << "alerts.yml names " << name << ", not exported";
  }
}

/// A port on 127.0.0.1 that was free a moment ago.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    std::abort();
  }
  close(fd);
  return ntohs(address.sin_port);
}

/// The alert names of an alert rules file.
std::set<std::string> AlertNames(const std::string& rules) {
  std::set<std::string> names;
  const std::regex alert(R"(- alert: (\S+))");
  for (std::sregex_iterator it(rules.begin(), rules.end(), alert), end; it != end; ++it) {
    names.insert((*it)[1]);
  }
  return names;
}

/// `text` percent-encoded for a URL's query string.
std::string UrlEncoded(const std::string& text) {
  std::string encoded;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded += static_cast<char>(c);
    } else {
      encoded += absl::StrFormat("%%%02X", c);
    }
  }
  return encoded;
}

/// The query of the dashboard's panel `title`, for every instance.
std::string PanelQuery(const std::string& title) {
  const Struct dashboard = ParseJson(ReadFile(Runfile("deploy/grafana/cclod.json")));
  for (const Value& panel : List(dashboard, "panels")) {
    if (String(panel.struct_value(), "title") != title) continue;
    const std::string expr =
        String(List(panel.struct_value(), "targets")[0].struct_value(), "expr");
    return absl::StrReplaceAll(expr, {{"$instance", ".*"}});
  }
  ADD_FAILURE() << "no panel '" << title << "'";
  return "";
}

TEST(MonitoringTest, PrometheusScrapesDaemonWithShippedConfig) {
  // A quota of 0, which the quota panel must not divide by.
  Daemon daemon("tenants:\n  - name: default\n    quotas: {communicators: 0}\n");
  // The shipped config and rules, only the target changed to this daemon.
  const std::string shipped = ReadFile(Runfile("deploy/prometheus/prometheus.yml"));
  const std::string rules = ReadFile(Runfile("deploy/prometheus/alerts.yml"));
  const std::string config =
      absl::StrReplaceAll(shipped, {{"- 127.0.0.1:9464", "- " + daemon.metrics_address()}});
  ASSERT_NE(config, shipped) << "no target 127.0.0.1:9464 in the shipped config";
  const std::string dir = TempDir() + "/prometheus";
  std::filesystem::create_directories(dir + "/data");
  std::ofstream(dir + "/prometheus.yml") << config;
  std::ofstream(dir + "/alerts.yml") << rules;

  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  Process prometheus({"/usr/bin/prometheus", "--config.file=" + dir + "/prometheus.yml",
                      "--storage.tsdb.path=" + dir + "/data", "--web.listen-address=" + address});
  ASSERT_TRUE(
      prometheus.WaitForOutput("Server is ready to receive web requests", absl::Seconds(60)))
      << prometheus.Output();

  // The first scrape comes within one scrape interval (15 s).
  Struct series;
  const bool scraped = WaitUntil(
      [&] {
        const std::string answer =
            HttpGet(address, "/api/v1/query?query=cclod_ops_completed_total");
        if (answer.find("\"result\":[{") == std::string::npos) return false;
        series = ParseJson(answer);
        return true;
      },
      absl::Seconds(120));
  ASSERT_TRUE(scraped) << prometheus.Output();
  const auto& result = List(Object(series, "data"), "result");
  ASSERT_EQ(result.size(), 1u);
  const Struct& labels = Object(result[0].struct_value(), "metric");
  EXPECT_EQ(String(labels, "__name__"), "cclod_ops_completed_total");
  EXPECT_EQ(String(labels, "job"), "cclod");
  EXPECT_EQ(String(labels, "instance"), daemon.metrics_address());

  // The quota panel plots each quota with a limit, none as NaN or infinity.
  const Struct quotas = ParseJson(
      HttpGet(address, "/api/v1/query?query=" + UrlEncoded(PanelQuery("Quota use per tenant"))));
  std::set<std::string> plotted;
  for (const Value& sample : List(Object(quotas, "data"), "result")) {
    const std::string quota = String(Object(sample.struct_value(), "metric"), "quota");
    const std::string value = List(sample.struct_value(), "value")[1].string_value();
    EXPECT_TRUE(std::isfinite(std::stod(value))) << quota << ": " << value;
    plotted.insert(quota);
  }
  EXPECT_TRUE(plotted.count("sessions")) << quotas.DebugString();
  EXPECT_FALSE(plotted.count("communicators")) << quotas.DebugString();

  // Prometheus loaded every shipped alert rule.
  const Struct loaded = ParseJson(HttpGet(address, "/api/v1/rules?type=alert"));
  std::set<std::string> loaded_names;
  for (const Value& group : List(Object(loaded, "data"), "groups")) {
    for (const Value& rule : List(group.struct_value(), "rules")) {
      loaded_names.insert(String(rule.struct_value(), "name"));
    }
  }
  EXPECT_EQ(loaded_names, AlertNames(rules));

  prometheus.Signal(SIGTERM);
  EXPECT_EQ(prometheus.Wait(absl::Seconds(60)).exit_code, 0) << prometheus.Output();
}

}  // namespace
}  // namespace cclo::testing
