// SIGHUP reloads the config file: tenant weights and quotas and the log format change for a
// running daemon, a bad file or a change that needs a restart is rejected with the reason
// and the running config stays, and keys that apply only at restart are named.
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cclo/client.h"
#include "cclo/v1/admin.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/daemon/json_line.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

const char kQuota[] = "tenants:\n  - name: default\n    quotas: {sessions: 1}\n";

class ReloadTest : public ::testing::Test {
 protected:
  /// `launcher` as Daemon takes it.
  explicit ReloadTest(const std::vector<std::string>& launcher = {})
      : daemon_(kQuota, launcher), path_(daemon_.runtime_dir() + "/../cclod.yaml") {
    std::ifstream file(path_);
    std::stringstream text;
    text << file.rdbuf();
    original_ = text.str();
  }

  /// Writes the original config with `from` replaced by `to`, sends SIGHUP and waits for
  /// the daemon to say `outcome` for the `count`th time.
  void Reload(const std::string& from, const std::string& to, const std::string& outcome) {
    ASSERT_TRUE(absl::StrContains(original_, from));
    std::ofstream(path_) << absl::StrReplaceAll(original_, {{from, to}});
    const size_t before = Count(outcome);
    daemon_.process().Signal(SIGHUP);
    ASSERT_TRUE(WaitUntil([&] { return Count(outcome) > before; }, absl::Seconds(10)))
        << daemon_.process().Output();
  }

  size_t Count(const std::string& text) { return Occurrences(daemon_.process().Output(), text); }

  v1::TenantInfo Tenant() {
    ProcessResult result = Ccloctl(daemon_, {"tenants", "--json"});
    v1::ListTenantsResponse tenants;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.output, &tenants).ok())
        << result.output;
    return tenants.tenants_size() == 1 ? tenants.tenants(0) : v1::TenantInfo();
  }

  Daemon daemon_;
  const std::string path_;
  std::string original_;
};

TEST_F(ReloadTest, GoodFileChangesQuotasAndWeightsOfTheRunningDaemon) {
  absl::StatusOr<std::unique_ptr<Client>> first = Client::Attach(daemon_.runtime_dir());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Client::Attach(daemon_.runtime_dir()).status().code(),
            absl::StatusCode::kResourceExhausted);
  Reload("quotas: {sessions: 1}", "weight: 5\n    quotas: {sessions: 2}", "reloaded ");
  const v1::TenantInfo tenant = Tenant();
  EXPECT_EQ(tenant.weight(), 5u);
  ASSERT_EQ(tenant.quotas_size(), 7);
  EXPECT_EQ(tenant.quotas(3).name(), "sessions");
  EXPECT_EQ(tenant.quotas(3).limit(), 2u);
  EXPECT_EQ(tenant.quotas(3).used(), 1u);
  absl::StatusOr<std::unique_ptr<Client>> second = Client::Attach(daemon_.runtime_dir());
  EXPECT_TRUE(second.ok()) << second.status();
}

TEST_F(ReloadTest, BadFileIsRejectedWithTheReasonAndTheRunningConfigStays) {
  Reload("quotas: {sessions: 1}", "quotas: {sessions: many}", "rejected, the running config");
  EXPECT_TRUE(absl::StrContains(daemon_.process().Output(), "'sessions': 'many' is not"))
      << daemon_.process().Output();
  Reload("quotas: {sessions: 1}", "quotas: {sessions: 1}\n  - name: extra",
         "rejected, the running config");
  EXPECT_TRUE(absl::StrContains(daemon_.process().Output(),
                                "tenants (default, extra) differ from the running ones (default); "
                                "adding, removing, renaming or reordering tenants needs a "
                                "restart"))
      << daemon_.process().Output();
  const v1::TenantInfo tenant = Tenant();
  EXPECT_EQ(tenant.name(), "default");
  EXPECT_EQ(tenant.quotas(3).limit(), 1u);
  // The daemon still serves.
  EXPECT_TRUE(Client::Attach(daemon_.runtime_dir()).ok());
}

TEST_F(ReloadTest, KeysAStartWouldRefuseAreRejected) {
  // Each applies only at restart, and the next start would have refused the file for it.
  const std::pair<std::string, std::string> refused[] = {
      {"admin_group: no_such_group\n",
       "the next start would refuse it: config key 'admin_group': no group named "
       "'no_such_group'"},
      {"data_tcp_congestion: no_such_cc\n",
       "the next start would refuse it: TCP congestion control 'no_such_cc': this kernel does "
       "not offer it"},
      {"peer_tls_cert_file: /nonexistent/node.pem\npeer_tls_key_file: /nonexistent/node.key\n"
       "peer_tls_ca_file: /nonexistent/ca.pem\n",
       "the next start would refuse it: config key 'peer_tls_cert_file': cannot read"},
      {"metrics_host: nosuch.invalid\n",
       "the next start would refuse it: cannot serve metrics on nosuch.invalid:0: cannot resolve "
       "'nosuch.invalid': "},
      {"metrics_host: '::1'\n",
       "the next start would refuse it: cannot serve metrics on [::1]:0: the HTTP server "
       "(civetweb) was built without IPv6"},
  };
  for (const auto& [keys, reason] : refused) {
    Reload("quotas: {sessions: 1}", "quotas: {sessions: 3}\n" + keys,
           "rejected, the running config");
    EXPECT_EQ(Count(reason), 1u) << daemon_.process().Output();
  }
  // The host the next start listens on: an address where peer_port is 0, a name that
  // resolves otherwise.
  const std::pair<std::string, std::string> hosts[] = {
      {"host: 'localhost'\npeer_port: 0",
       "the next start would refuse it: host 'localhost' is not an IPv4 or IPv6 address "
       "(peer_port 0 needs one)"},
      {"host: 'nosuch.invalid'\npeer_port: 7470\nmetrics_host: 127.0.0.1",
       "the next start would refuse it: config key 'host': cannot resolve 'nosuch.invalid': "},
  };
  for (const auto& [to, reason] : hosts) {
    Reload("host: '127.0.0.1'\npeer_port: 0", to, "rejected, the running config");
    EXPECT_EQ(Count(reason), 1u) << daemon_.process().Output();
  }
  EXPECT_EQ(Tenant().quotas(3).limit(), 1u);
}

// A daemon without CAP_CHOWN, as the unit's DynamicUser runs it: it may give admin.sock
// only to a group of its own.
class ReloadWithoutChownTest : public ReloadTest {
 protected:
  ReloadWithoutChownTest() : ReloadTest({"/usr/bin/setpriv", "--bounding-set", "-chown", "--"}) {}
};

TEST_F(ReloadWithoutChownTest, AnAdminGroupNotOfTheDaemonsIsRejected) {
  // The next start fails 'cannot set owner group and mode of .../admin.sock: Operation not
  // permitted'; the reload took the file before, naming admin_group as a restart key.
  Reload("quotas: {sessions: 1}", "quotas: {sessions: 3}\nadmin_group: nogroup\n",
         "rejected, the running config");
  EXPECT_EQ(Count("the next start would refuse it: config key 'admin_group': cclod may not give "
                  "admin.sock to group 'nogroup' (gid "),
            1u)
      << daemon_.process().Output();
  EXPECT_EQ(Tenant().quotas(3).limit(), 1u);
  // Its own group it may.
  const group* own = getgrgid(getegid());
  ASSERT_NE(own, nullptr);
  Reload("quotas: {sessions: 1}",
         absl::StrCat("quotas: {sessions: 3}\nadmin_group: ", own->gr_name, "\n"),
         "changed keys that apply only at restart: admin_group");
  EXPECT_EQ(Tenant().quotas(3).limit(), 3u);
}

TEST_F(ReloadTest, ARuntimeDirAStartWouldRefuseIsRejected) {
  // Another user may write it (RuntimeLock::Take refuses it); one not made yet is made by
  // the next start, as cclod's own.
  const std::string running = "runtime_dir: " + daemon_.runtime_dir() + "\n";
  const std::string shared = daemon_.runtime_dir() + "/../shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  Reload(running, "runtime_dir: " + shared + "\n", "rejected, the running config");
  EXPECT_EQ(Count(absl::StrCat("the next start would refuse it: runtime dir ", shared,
                               " (owner uid ", geteuid(), ", mode 0777) must be a directory")),
            1u)
      << daemon_.process().Output();
  // Not made yet, but where another user could put one of theirs first.
  Reload(running, "runtime_dir: " + shared + "/later/cclod\n", "rejected, the running config");
  EXPECT_EQ(Count(absl::StrCat("the next start would refuse it: runtime dir ", shared,
                               "/later/cclod is in ")),
            1u)
      << daemon_.process().Output();
  Reload(running, "runtime_dir: " + daemon_.runtime_dir() + "/../later\n",
         "changed keys that apply only at restart: runtime_dir");
  EXPECT_EQ(Count("rejected, the running config"), 2u) << daemon_.process().Output();
  // A relative one is the working dir's, whose dirs exist above it (the reload's check
  // walked up the relative path's own dirs for good before).
  Reload(running, "runtime_dir: not_made/cclod\n",
         "changed keys that apply only at restart: runtime_dir");
  Reload(running, "runtime_dir: \"\"\n", "rejected, the running config");
  EXPECT_EQ(Count("rejected, the running config stays: config key 'runtime_dir': is empty; give "
                  "the dir of cclod's sockets (as /run/cclod)"),
            1u)
      << daemon_.process().Output();
}

TEST_F(ReloadTest, StatusAndMetricsCountReloadsAndSayWhyTheLastWasRejected) {
  auto status = [this] {
    v1::StatusResponse status;
    const ProcessResult result = Ccloctl(daemon_, {"status", "--json"});
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.output, &status).ok())
        << result.output;
    return status;
  };
  Reload("quotas: {sessions: 1}", "quotas: {sessions: many}", "rejected, the running config");
  v1::StatusResponse rejected = status();
  EXPECT_EQ(rejected.reloads_applied(), 0u);
  EXPECT_EQ(rejected.reloads_rejected(), 1u);
  EXPECT_TRUE(absl::StrContains(rejected.reload_error(), "'sessions': 'many' is not"))
      << rejected.reload_error();
  std::string metrics = Scrape(daemon_);
  EXPECT_TRUE(absl::StrContains(metrics, "cclod_config_reloads_total{result=\"rejected\"} 1\n"))
      << metrics;
  EXPECT_TRUE(absl::StrContains(metrics, "cclod_config_reload_rejected 1\n")) << metrics;

  Reload("quotas: {sessions: 1}", "quotas: {sessions: 2}", "reloaded ");
  const v1::StatusResponse applied = status();
  EXPECT_EQ(applied.reloads_applied(), 1u);
  EXPECT_EQ(applied.reloads_rejected(), 1u);
  EXPECT_EQ(applied.reload_error(), "");
  metrics = Scrape(daemon_);
  EXPECT_TRUE(absl::StrContains(metrics, "cclod_config_reloads_total{result=\"applied\"} 1\n"))
      << metrics;
  EXPECT_TRUE(absl::StrContains(metrics, "cclod_config_reload_rejected 0\n")) << metrics;
}

TEST_F(ReloadTest, AReasonQuotingBytesThatAreNotUtf8StillShowsInStatus) {
  // The Status answer could not carry the reason: `ccloctl status` failed 'No message
  // returned for unary request' until a reload was applied.
  Reload("quotas: {sessions: 1}", "quotas: {sessions: caf\xe9}", "rejected, the running config");
  const ProcessResult result = Ccloctl(daemon_, {"status", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  v1::StatusResponse status;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(result.output, &status).ok())
      << result.output;
  EXPECT_EQ(status.reloads_rejected(), 1u);
  EXPECT_TRUE(absl::StrContains(status.reload_error(), "'sessions': 'caf\\xe9' is not"))
      << status.reload_error();
}

TEST_F(ReloadTest, FileWithoutKeysIsRejected) {
  // A file being written may be empty yet, or hold only its first comments; its defaults
  // would have replaced the running quotas, log settings and policy.
  Reload(original_, "", "rejected, the running config");
  Reload(original_, "# cclod config\n", "rejected, the running config");
  EXPECT_EQ(Count("the file sets no key (it is empty or holds only comments, as a file being "
                  "written may); write the new config beside it and rename it over this one"),
            2u)
      << daemon_.process().Output();
  EXPECT_EQ(Tenant().quotas(3).limit(), 1u);
}

TEST_F(ReloadTest, LogFormatChangesAtOnce) {
  // The line that reports the reload, the last one in the output.
  auto reloaded_line = [this] {
    const std::string output = daemon_.process().Output();
    const size_t start = output.rfind('\n', output.rfind("reloaded ")) + 1;
    return output.substr(start, output.find('\n', start) - start);
  };
  Reload("log_level: debug", "log_level: debug\nlog_format: json", "reloaded ");
  const std::string json = reloaded_line();
  EXPECT_TRUE(ParseJsonLine(json).ok()) << ParseJsonLine(json).status();
  EXPECT_FALSE(absl::StrContains(daemon_.process().Output(), "apply only at restart"))
      << daemon_.process().Output();
  Reload("log_level: debug", "log_level: debug", "reloaded ");
  EXPECT_EQ(reloaded_line()[0], '[') << daemon_.process().Output();
}

TEST_F(ReloadTest, KeysThatApplyAtRestartAreNamed) {
  Reload("quotas: {sessions: 1}",
         "quotas: {sessions: 3}\nsegment_bytes: 65536\nrendezvous_waiting_per_peer: 10\n"
         "peer_timeout_ms: 5000\n",
         "changed keys that apply only at restart: segment_bytes, eager_max_bytes, "
         "rendezvous_waiting_per_peer, peer_timeout_ms");
  EXPECT_EQ(Tenant().quotas(3).limit(), 3u);
}

// A reload looks up an admin group only where it differs from the last config taken, as it
// does host names: a group database that fails for now (a directory service down) refused
// every reload before, of tenants' quotas say, for a key that had not changed and applies
// only at a start. cclod runs in a mount namespace of its own whose /etc/group is a file the
// test empties (the only source of groups its nsswitch.conf gives; nscd's socket hidden).
TEST(ReloadGroupTest, AnUnchangedAdminGroupIsNotLookedUpAgain) {
  const std::string dir = ::testing::TempDir();
  const std::string groups = dir + "/group";
  const std::string nsswitch = dir + "/nsswitch.conf";
  {
    std::ifstream system_groups("/etc/group");
    std::ofstream(groups) << system_groups.rdbuf();
  }
  std::ofstream(nsswitch) << "passwd: files\ngroup: files\nhosts: files\n";
  const absl::StatusOr<std::vector<std::string>> launcher =
      WithOwnFiles(nsswitch, groups, "/etc/group");
  if (!launcher.ok()) GTEST_SKIP() << launcher.status();
  Daemon daemon(absl::StrCat(kQuota, "admin_group: root\n"), *launcher);
  const std::string path = daemon.runtime_dir() + "/../cclod.yaml";
  std::stringstream original;
  original << std::ifstream(path).rdbuf();
  auto reload = [&](const std::string& group, const std::string& outcome) {
    std::ofstream(path) << absl::StrReplaceAll(
        original.str(),
        {{"quotas: {sessions: 1}", "quotas: {sessions: 3}"}, {"admin_group: root", group}});
    const size_t before = Occurrences(daemon.process().Output(), outcome);
    daemon.process().Signal(SIGHUP);
    return WaitUntil([&] { return Occurrences(daemon.process().Output(), outcome) > before; },
                     absl::Seconds(10));
  };
  std::ofstream(groups, std::ios::trunc).close();  // the same file: the bind mount shows it
  EXPECT_TRUE(reload("admin_group: root", "reloaded ")) << daemon.process().Output();
  v1::ListTenantsResponse tenants;
  const ProcessResult listed = Ccloctl(daemon, {"tenants", "--json"});
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(listed.output, &tenants).ok())
      << listed.output;
  ASSERT_EQ(tenants.tenants_size(), 1) << listed.output;
  EXPECT_EQ(tenants.tenants(0).quotas(3).limit(), 3u) << listed.output;
  // A changed one is looked up, and refused here.
  EXPECT_TRUE(reload("admin_group: daemon",
                     "the next start would refuse it: config key 'admin_group': no group named "
                     "'daemon'"))
      << daemon.process().Output();
}

}  // namespace
}  // namespace cclo::testing
