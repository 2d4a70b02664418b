// cclod: the per-node collective offload daemon.
#include <signal.h>

#include <cstdio>

#include "CLI/CLI.hpp"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/grpc_log.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  CLI::App app{"cclod: collective-communication offload daemon"};
  std::string config_path;
  app.add_option("-c,--config", config_path, "YAML config file (defaults apply without one)");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<cclo::daemon::Config> config =
      config_path.empty() ? cclo::daemon::ParseConfig("") : cclo::daemon::LoadConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "cclod: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  cclo::daemon::ForwardGrpcLogs();

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<cclo::daemon::Daemon>> daemon =
      cclo::daemon::Daemon::Start(*config);
  if (!daemon.ok()) {
    spdlog::critical("cclod cannot start: {}", std::string(daemon.status().message()));
    cclo::daemon::StopForwardingGrpcLogs();
    return 1;
  }
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("received signal {}; shutting down", signal_number);
  daemon->reset();
  spdlog::info("cclod stopped");
  cclo::daemon::StopForwardingGrpcLogs();
  return 0;
}
