// cclod tells systemd it is ready, pings the watchdog when systemd enables it, and says when
// it reloads and when it stops: a real daemon started with $NOTIFY_SOCKET pointing at a
// socket of the test.
#include "daemon/notify.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

/// A datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  NotifySocket() {
    char dir_template[] = "/tmp/cclo.XXXXXX";
    dir_ = mkdtemp(dir_template);
    path_ = dir_ + "/notify";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path_.copy(address.sun_path, sizeof(address.sun_path) - 1);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) std::abort();
  }
  ~NotifySocket() {
    close(fd_);
    std::filesystem::remove_all(dir_);
  }
  const std::string& path() const { return path_; }

  /// Reads messages until one contains `line` or 30 s pass; returns whether it came.
  bool WaitFor(const std::string& line) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    char message[4096];
    pollfd ready{fd_, POLLIN, 0};
    while (absl::Now() < deadline &&
           poll(&ready, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()))) >
               0) {
      const ssize_t got = recv(fd_, message, sizeof(message), 0);
      if (got > 0 &&
          std::string(message, static_cast<size_t>(got)).find(line) != std::string::npos) {
        return true;
      }
    }
    return false;
  }

  /// Reads messages until one contains `until` or 30 s pass; returns how many of those
  /// before it contain `line`, or -1 if `until` did not come.
  int CountUntil(const std::string& line, const std::string& until) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    char message[4096];
    pollfd ready{fd_, POLLIN, 0};
    int count = 0;
    while (absl::Now() < deadline &&
           poll(&ready, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()))) >
               0) {
      const ssize_t got = recv(fd_, message, sizeof(message), 0);
      if (got <= 0) continue;
      const std::string text(message, static_cast<size_t>(got));
      if (text.find(until) != std::string::npos) return count;
      count += text.find(line) != std::string::npos;
    }
    return -1;
  }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

TEST(NotifyTest, ReadyWatchdogReloadingAndStopping) {
  NotifySocket systemd;
  setenv("NOTIFY_SOCKET", systemd.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "2000000", 1);
  auto daemon = std::make_unique<Daemon>();
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");

  EXPECT_TRUE(systemd.WaitFor("READY=1"));
  EXPECT_TRUE(systemd.WaitFor("WATCHDOG=1"));
  EXPECT_TRUE(daemon->process().WaitForOutput("systemd watchdog on: pinging every 1000 ms",
                                              absl::Seconds(10)))
      << daemon->process().Output();
  daemon->process().Signal(SIGHUP);
  EXPECT_TRUE(systemd.WaitFor("RELOADING=1"));
  // Fed as the reload starts (TheWatchdogIsFedWhileAReloadWaitsForALookupForAWhile: and
  // while it runs): READY=1 comes after that WATCHDOG=1, not before the next ping's.
  EXPECT_TRUE(systemd.WaitFor("WATCHDOG=1"));
  EXPECT_TRUE(systemd.WaitFor("READY=1"));
  daemon.reset();  // SIGTERM
  EXPECT_TRUE(systemd.WaitFor("STOPPING=1"));
}

// A reload that looks up a new host name waits for the resolver, which may take longer than
// WatchdogSec: the watchdog is fed meanwhile, or systemd would abort the daemon and end every
// session; but only for 4 × WatchdogSec, so that a reload stuck for good still ends it. The
// daemon runs in a mount namespace of its own whose /etc/hosts is a FIFO (the only source of
// names its nsswitch.conf gives), so that the lookup waits until the test opens the FIFO.
TEST(NotifyTest, TheWatchdogIsFedWhileAReloadWaitsForALookupForAWhile) {
  const std::string dir = ::testing::TempDir();
  const std::string hosts = dir + "/hosts";
  const std::string nsswitch = dir + "/nsswitch.conf";
  unlink(hosts.c_str());  // a run before in this dir
  ASSERT_EQ(mkfifo(hosts.c_str(), 0600), 0) << std::strerror(errno);
  std::ofstream(nsswitch) << "hosts: files\n";
  const absl::StatusOr<std::vector<std::string>> launcher =
      WithOwnFiles(nsswitch, hosts, "/etc/hosts");
  if (!launcher.ok()) GTEST_SKIP() << launcher.status();

  NotifySocket systemd;
  setenv("NOTIFY_SOCKET", systemd.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "1000000", 1);
  auto daemon = std::make_unique<Daemon>("", *launcher);
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(systemd.WaitFor("READY=1"));

  const std::string config_path =
      std::filesystem::path(daemon->runtime_dir()).parent_path() / "cclod.yaml";
  std::ifstream in(config_path);
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string started = "host: '127.0.0.1'\npeer_port: 0\n";
  ASSERT_NE(config.find(started), std::string::npos) << config;
  config.replace(config.find(started), started.size(), "host: slow.example\npeer_port: 7470\n");
  std::ofstream(config_path) << config;
  daemon->process().Signal(SIGHUP);
  ASSERT_TRUE(systemd.WaitFor("RELOADING=1"));
  // Fed while the lookup waits on the FIFO, up to the cap (no READY=1 can come before the
  // test opens it).
  EXPECT_TRUE(daemon->process().WaitForOutput(
      "the reload still runs after 4s: no longer feeding systemd's watchdog", absl::Seconds(20)))
      << daemon->process().Output();

  // Each open of the FIFO for writing, closed at once, gives a reader waiting in its open an
  // empty file.
  std::atomic<bool> reloaded{false};
  std::thread writer([&] {
    while (!reloaded) {
      const int fd = open(hosts.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) close(fd);
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  EXPECT_EQ(systemd.CountUntil("WATCHDOG=1", "READY=1"), daemon::kReloadPings);
  reloaded = true;
  writer.join();
  EXPECT_TRUE(daemon->process().WaitForOutput("config key 'host': cannot resolve 'slow.example'",
                                              absl::Seconds(10)))
      << daemon->process().Output();
}

TEST(NotifyTest, BadCommandLineOrConfigPathExitsTwoWhichSystemdDoesNotRetry) {
  // The unit's RestartPreventExitStatus=2: a start that cannot pass later is not retried.
  // An unknown option exited 109 and a missing value 114 (CLI11's codes), so systemd
  // retried them; a config path naming a directory started the daemon with every default,
  // and one naming a device that never ends (/dev/zero) ran it out of memory (exit 134).
  const std::string dir = ::testing::TempDir();
  const struct {
    std::vector<std::string> args;
    std::string reason;
  } cases[] = {
      {{"--bogus"}, "The following argument was not expected: --bogus"},
      {{"--config"}, "--config: 1 required TEXT missing"},
      // Started on every default, with nothing to reload.
      {{"--config", ""},
       "--config: is empty; give the config file's path, or no --config for the defaults"},
      {{"--config", dir}, "cclod: cannot read config file " + dir + ": Is a directory"},
      {{"--config", "/dev/zero"}, "cclod: cannot read config file /dev/zero: not a regular file"},
  };
  for (const auto& [args, reason] : cases) {
    std::vector<std::string> command = {Runfile("daemon/cclod")};
    command.insert(command.end(), args.begin(), args.end());
    const ProcessResult result = Process(command).Wait(absl::Seconds(30));
    EXPECT_EQ(result.exit_code, 2) << args[0] << ": " << result.output;
    EXPECT_NE(result.output.find(reason), std::string::npos) << args[0] << ": " << result.output;
  }
}

}  // namespace
}  // namespace cclo::testing
