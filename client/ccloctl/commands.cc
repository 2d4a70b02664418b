#include "client/ccloctl/commands.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ccloctl/admin_rpc.h"
#include "client/ccloctl/format.h"
#include "client/ccloctl/policy_command.h"
#include "client/cli.h"

namespace cclo::ccloctl {
namespace {

/// How long `drain` waits for ops by default, in seconds.
constexpr double kDefaultDrainSeconds = 60;
/// How much longer than the drain's timeout `drain` waits for the daemon's answer: the
/// daemon gives clients 2 s more to collect the ops it cut off.
constexpr absl::Duration kDrainAnswerMargin = absl::Seconds(10);

struct GlobalOptions {
  std::string runtime_dir = "/run/cclod";
  bool json = false;
  double timeout_seconds = 5;
};

}  // namespace

int Main(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"ccloctl: inspect and operate a running cclod through its admin socket.", "ccloctl"};
  GlobalOptions options;
  app.add_option("--runtime-dir", options.runtime_dir, "cclod runtime directory (has admin.sock)")
      ->envname("CCLO_RUNTIME_DIR")
      ->check(client::RuntimeDir())
      ->capture_default_str();
  app.add_flag("--json", options.json, "print one line of JSON instead of a table");
  app.add_option("--timeout", options.timeout_seconds, "RPC deadline in seconds")
      ->check(client::Seconds(0.001, 86400))
      ->capture_default_str();
  // At most one command; none is refused below naming them all (an unknown word is then
  // reported as such instead of as a missing command).
  app.require_subcommand(0, 1);
  app.fallthrough();
  CLI::App* status = app.add_subcommand("status", "daemon identity, uptime and engine counters");
  CLI::App* comms = app.add_subcommand(
      "comms",
      "communicators this daemon takes part in: id, tenant, size, local ranks, state, ops, error");
  comms->require_subcommand(0, 1);
  std::string comm_id;
  CLI::App* show = comms->add_subcommand(
      "show",
      "one communicator: members (addresses, local ranks and the sessions holding them), state, "
      "departed ranks, ops completed/failed/in flight, bytes sent, creation time");
  show->add_option("id", comm_id,
                   "communicator id in hex as `ccloctl comms` prints it, or a "
                   "prefix of it that names one communicator")
      ->required()
      ->check(client::Utf8());
  CLI::App* destroy = comms->add_subcommand(
      "destroy",
      "take a communicator down on this daemon: it breaks, ops of its local ranks fail with "
      "UNAVAILABLE \"destroyed by the operator\", other daemons hear that this one broke it, "
      "and the tenant's communicators quota it held is given back at once");
  destroy
      ->add_option("id", comm_id,
                   "communicator id in hex as `ccloctl comms` prints it, or a "
                   "prefix of it that names one communicator")
      ->required()
      ->check(client::Utf8());
  CLI::App* tenants = app.add_subcommand(
      "tenants",
      "tenants: weight, each quota as used/limit, ops queued and running, quota refusals");
  CLI::App* sessions = app.add_subcommand(
      "sessions",
      "attached client sessions: tenant, pid/uid/gid, buffers, communicators, ops queued and "
      "running, attach time");
  CLI::App* buffers =
      app.add_subcommand("buffers", "shared-memory buffers: id, session, tenant, bytes, state");
  CLI::App* stats = app.add_subcommand(
      "stats",
      "ops since the start by tenant, collective, algorithm and protocol: ok, failed, payload "
      "bytes, latency p50/p99; errors by reason");
  std::string level;
  CLI::App* log_level = app.add_subcommand(
      "log-level", "set the daemon's log level until its next restart or reload");
  log_level->add_option("level", level, "trace, debug, info, warn, error, critical or off")
      ->required()
      ->check(client::Utf8());
  const PolicyCommand policy(app);
  double drain_seconds = kDefaultDrainSeconds;
  CLI::App* drain = app.add_subcommand(
      "drain",
      "stop admitting work (attaches, joins, buffers, ops), wait for the ops already submitted, "
      "then the daemon exits with status 0; prints what finished and what was cut off at the "
      "timeout (exit code 1 if any was)");
  drain
      ->add_option("--timeout", drain_seconds,
                   "seconds to wait for ops in flight; those left then fail and the daemon exits")
      ->check(client::Seconds(0.001, 86400))
      ->capture_default_str();
  if (std::optional<int> code = client::ParseCommandLine(app, argc, argv, out, err)) return *code;
  if (app.get_subcommands().empty()) return client::CommandRequired(app, err);

  AdminRpc admin(options.runtime_dir, absl::Seconds(options.timeout_seconds));
  using Stub = v1::Admin::Stub;
  if (status->parsed()) {
    return Print(admin.Call(&Stub::Status, "Status"), options.json, &StatusTable, out, err);
  }
  if (tenants->parsed()) {
    return Print(admin.Call(&Stub::ListTenants, "ListTenants"), options.json, &TenantsTable, out,
                err);
  }
  if (sessions->parsed()) {
    return Print(admin.Call(&Stub::ListSessions, "ListSessions"), options.json, &SessionsTable, out,
                err);
  }
  if (buffers->parsed()) {
    return Print(admin.Call(&Stub::ListBuffers, "ListBuffers"), options.json, &BuffersTable, out,
                err);
  }
  if (stats->parsed()) {
    return Print(admin.Call(&Stub::Stats, "Stats"), options.json, &StatsTable, out, err);
  }
  if (log_level->parsed()) {
    v1::SetLogLevelRequest request;
    request.set_level(level);
    return Print(admin.Call(&Stub::SetLogLevel, "SetLogLevel", request), options.json,
                &LogLevelTable, out, err);
  }
  if (policy.parsed()) return policy.Run(admin, options.json, out, err);
  if (destroy->parsed()) {
    v1::AdminDestroyCommunicatorRequest request;
    request.set_comm_id(comm_id);
    return Print(admin.Call(&Stub::DestroyCommunicator, "DestroyCommunicator", request),
                options.json, &DestroyTable, out, err);
  }
  if (drain->parsed()) {
    v1::DrainRequest request;
    request.set_timeout_ms(static_cast<uint32_t>(drain_seconds * 1000));
    AdminRpc waiting(options.runtime_dir, absl::Seconds(drain_seconds) + kDrainAnswerMargin);
    absl::StatusOr<v1::DrainResponse> drained = waiting.Call(&Stub::Drain, "Drain", request);
    const int code = Print(drained, options.json, &DrainTable, out, err);
    if (code != 0 || !drained->timed_out()) return code;
    err << "ccloctl: drain timed out after " << drain_seconds << " s: " << drained->ops_cut_off()
        << " ops cut off, " << drained->results_uncollected() << " results not collected\n";
    return 1;
  }
  if (show->parsed()) {
    v1::ShowCommunicatorRequest request;
    request.set_comm_id(comm_id);
    return Print(admin.Call(&Stub::ShowCommunicator, "ShowCommunicator", request), options.json,
                &CommunicatorTable, out, err);
  }
  return Print(admin.Call(&Stub::ListCommunicators, "ListCommunicators"), options.json,
              &CommunicatorsTable, out, err);
}

}  // namespace cclo::ccloctl
