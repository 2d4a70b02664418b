#include "client/ccloctl/commands.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ccloctl/admin_rpc.h"
#include "client/ccloctl/format.h"
#include "client/cli.h"

namespace cclo::ccloctl {
namespace {

struct GlobalOptions {
  std::string runtime_dir = "/run/cclod";
  bool json = false;
  double timeout_seconds = 5;
};

// Prints `response` as JSON or through `table`, or its error; returns the exit code.
template <typename Response>
int Show(const absl::StatusOr<Response>& response, bool json, std::string (*table)(const Response&),
         std::ostream& out, std::ostream& err) {
  if (!response.ok()) {
    err << "ccloctl: " << response.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> text = json ? ToJson(*response) : table(*response);
  if (!text.ok()) {
    err << "ccloctl: " << text.status().message() << "\n";
    return 1;
  }
  out << *text;
  return 0;
}

}  // namespace

int Main(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"ccloctl: inspect a running cclod through its admin socket.", "ccloctl"};
  GlobalOptions options;
  app.add_option("--runtime-dir", options.runtime_dir, "cclod runtime directory (has admin.sock)")
      ->envname("CCLO_RUNTIME_DIR")
      ->capture_default_str();
  app.add_flag("--json", options.json, "print one line of JSON instead of a table");
  app.add_option("--timeout", options.timeout_seconds, "RPC deadline in seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.require_subcommand(1);
  app.fallthrough();
  CLI::App* status = app.add_subcommand("status", "daemon identity, uptime and engine counters");
  CLI::App* comms = app.add_subcommand(
      "comms", "communicators this daemon takes part in: id, size, local ranks, state, ops, error");
  comms->require_subcommand(0, 1);
  std::string comm_id;
  CLI::App* show = comms->add_subcommand(
      "show",
      "one communicator: members (addresses, local ranks and the sessions holding them), state, "
      "departed ranks, ops completed/failed/in flight, bytes sent, creation time");
  show->add_option("id", comm_id,
                   "communicator id in hex as `ccloctl comms` prints it, or a "
                   "prefix of it that names one communicator")
      ->required();
  CLI::App* tenants = app.add_subcommand(
      "tenants",
      "tenants: weight, each quota as used/limit, ops queued and running, quota refusals");
  CLI::App* sessions = app.add_subcommand(
      "sessions",
      "attached client sessions: tenant, pid/uid/gid, buffers, communicators, ops queued and "
      "running, attach time");
  CLI::App* buffers =
      app.add_subcommand("buffers", "shared-memory buffers: id, session, tenant, bytes");
  CLI::App* stats = app.add_subcommand(
      "stats",
      "ops since the start by tenant, collective, algorithm and protocol: ok, failed, payload "
      "bytes, latency p50/p99; errors by reason");
  std::string level;
  CLI::App* log_level = app.add_subcommand(
      "log-level", "set the daemon's log level until its next restart or reload");
  log_level->add_option("level", level, "trace, debug, info, warn, error, critical or off")
      ->required();
  if (std::optional<int> code = client::ParseCommandLine(app, argc, argv, out, err)) return *code;

  AdminRpc admin(options.runtime_dir, absl::Seconds(options.timeout_seconds));
  using Stub = v1::Admin::Stub;
  if (status->parsed()) {
    return Show(admin.Call(&Stub::Status, "Status"), options.json, &StatusTable, out, err);
  }
  if (tenants->parsed()) {
    return Show(admin.Call(&Stub::ListTenants, "ListTenants"), options.json, &TenantsTable, out,
                err);
  }
  if (sessions->parsed()) {
    return Show(admin.Call(&Stub::ListSessions, "ListSessions"), options.json, &SessionsTable, out,
                err);
  }
  if (buffers->parsed()) {
    return Show(admin.Call(&Stub::ListBuffers, "ListBuffers"), options.json, &BuffersTable, out,
                err);
  }
  if (stats->parsed()) {
    return Show(admin.Call(&Stub::Stats, "Stats"), options.json, &StatsTable, out, err);
  }
  if (log_level->parsed()) {
    v1::SetLogLevelRequest request;
    request.set_level(level);
    return Show(admin.Call(&Stub::SetLogLevel, "SetLogLevel", request), options.json,
                &LogLevelTable, out, err);
  }
  if (show->parsed()) {
    v1::ShowCommunicatorRequest request;
    request.set_comm_id(comm_id);
    return Show(admin.Call(&Stub::ShowCommunicator, "ShowCommunicator", request), options.json,
                &CommunicatorTable, out, err);
  }
  return Show(admin.Call(&Stub::ListCommunicators, "ListCommunicators"), options.json,
              &CommunicatorsTable, out, err);
}

}  // namespace cclo::ccloctl
