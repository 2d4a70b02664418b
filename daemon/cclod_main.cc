// cclod: the per-node collective offload daemon.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/grpc_log.h"
#include "daemon/log_format.h"
#include "daemon/notify.h"
#include "spdlog/spdlog.h"

namespace {

/// SIGHUP: re-reads the config file and applies what may change at run time; a bad file
/// is rejected with the reason and the running config stays.
void Reload(cclo::daemon::Daemon& daemon, const std::string& config_path) {
  if (config_path.empty()) {
    spdlog::warn("SIGHUP: no config file to reload (started without --config)");
    return;
  }
  absl::StatusOr<std::vector<std::string>> kept =
      daemon.Reload(cclo::daemon::LoadConfig(config_path, /*reload=*/true));
  if (!kept.ok()) {
    spdlog::error("reload of {} rejected, the running config stays: {}", config_path,
                  std::string(kept.status().message()));
    return;
  }
  spdlog::info(
      "reloaded {}: log level and format, policy, tenant identities, weights and quotas applied",
      config_path);
  if (!kept->empty()) {
    spdlog::warn("reload of {}: changed keys that apply only at restart: {}", config_path,
                 absl::StrJoin(*kept, ", "));
  }
}

/// Raises the soft limit on open descriptors to the hard one: every session, buffer, ring
/// and data session holds some, and a process gets a soft limit of 1024 by default.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t soft = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("cannot raise the open descriptor limit from {} to {}: {}", soft, limit.rlim_max,
                 std::strerror(errno));
    return;
  }
  spdlog::info("open descriptor limit raised from {} to {}", soft, limit.rlim_max);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil is built with deadlock detection on: every lock and unlock of an
  // absl::Mutex then updates a global lock graph, on the ops' fast path too.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"cclod: collective-communication offload daemon"};
  std::string config_path;
  // An empty path (a unit's `--config $CONFIG` with CONFIG unset) would start the daemon on
  // every default, with nothing for a SIGHUP to reload.
  app.add_option("-c,--config", config_path, "YAML config file (defaults apply without one)")
      ->check([](const std::string& path) {
        return path.empty() ? "is empty; give the config file's path, or no --config for the "
                              "defaults"
                            : "";
      });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // A bad command line is a bad config too (exit code 2, which the systemd unit does not
    // retry); CLI11's own codes (106 and up) made systemd restart it until its start limit.
    return app.exit(error) == 0 ? 0 : 2;
  }

  absl::StatusOr<cclo::daemon::Config> config =
      config_path.empty() ? cclo::daemon::ParseConfig("") : cclo::daemon::LoadConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "cclod: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  cclo::daemon::SetLogFormat(config->log_format);
  cclo::daemon::ForwardGrpcLogs();
  RaiseDescriptorLimit();

  // Block the stop and reload signals in every thread; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<cclo::daemon::Daemon>> daemon =
      cclo::daemon::Daemon::Start(*config);
  if (!daemon.ok()) {
    spdlog::critical("cclod cannot start: {}", std::string(daemon.status().message()));
    cclo::daemon::StopForwardingGrpcLogs();
    // A config this host cannot run (a group, TLS file, host or congestion control it
    // names) is a bad config as much as a malformed file: restarting does not help. A
    // lookup that failed for now (DNS, the group database) is UNAVAILABLE and retried.
    return daemon.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const absl::Duration watchdog_ping = cclo::daemon::WatchdogPingInterval();
  if (watchdog_ping > absl::ZeroDuration()) {
    spdlog::info("systemd watchdog on: pinging every {} ms",
                 absl::ToInt64Milliseconds(watchdog_ping));
  }
  cclo::daemon::NotifyReady();
  siginfo_t received{};
  while ((received = cclo::daemon::WaitForSignal(signals, watchdog_ping)).si_signo == SIGHUP) {
    cclo::daemon::NotifyReloading();
    cclo::daemon::FeedingWatchdog(watchdog_ping, [&] { Reload(**daemon, config_path); });
    cclo::daemon::NotifyReady();
  }
  // The daemon signals itself only once a drain finished.
  if (received.si_pid == getpid()) {
    spdlog::info("shutting down: the drain finished");
  } else {
    spdlog::info("received signal {}; shutting down", received.si_signo);
  }
  cclo::daemon::NotifyStopping();
  daemon->reset();
  spdlog::info("cclod stopped");
  cclo::daemon::StopForwardingGrpcLogs();
  return 0;
}
