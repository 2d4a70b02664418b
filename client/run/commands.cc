#include "client/run/commands.h"

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "client/run/driver.h"
#include "client/run/options.h"

namespace cclo::run {
namespace {

// Adds --runtime-dir to `command`, defaulting to $CCLO_RUNTIME_DIR or /run/cclod.
void AddRuntimeDir(CLI::App& command, std::string& runtime_dir) {
  command.add_option("--runtime-dir", runtime_dir, "runtime directory of the local cclod")
      ->envname("CCLO_RUNTIME_DIR")
      ->check(client::RuntimeDir())
      ->capture_default_str();
}

int Report(const absl::Status& status, std::ostream& err) {
  if (status.ok()) return 0;
  err << "cclo-run: " << status.message() << "\n";
  return 1;
}

}  // namespace

int Main(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"cclo-run: a client process of cclod that runs ops and checks their results.",
               "cclo-run"};
  double attach_timeout_seconds = 10;
  app.add_option("--attach-timeout", attach_timeout_seconds,
                 "seconds to attach to the daemon and deadline of its plain RPCs")
      ->check(client::Seconds(0.001, 86400))
      ->capture_default_str();
  // None is refused below naming them all, as ccloctl does.
  app.require_subcommand(0, 1);
  app.fallthrough();

  std::string token_runtime_dir = "/run/cclod";
  CLI::App* token = app.add_subcommand(
      "token", "make a communicator token with the local daemon as root and print it");
  AddRuntimeDir(*token, token_runtime_dir);

  RunArguments arguments;
  arguments.runtime_dir = "/run/cclod";
  CLI::App* run = app.add_subcommand(
      "run", "join a communicator as one rank, run the ops at every size and check the results");
  AddRuntimeDir(*run, arguments.runtime_dir);
  run->add_option("--token", arguments.token,
                  "communicator token from `cclo-run token` (a password: other users can read "
                  "argv, not the environment)")
      ->envname("CCLO_TOKEN")
      ->required()
      ->check(client::Utf8());
  run->add_option("--rank", arguments.rank, "this process's rank, 0 <= rank < size")
      ->required()
      ->check(client::Decimal());
  run->add_option("--size", arguments.size, "number of ranks")
      ->required()
      ->check(client::Decimal());
  run->add_option("--ops", arguments.ops,
                  "comma-separated ops: sendrecv, bcast, scatter, gather, allgather, reduce, "
                  "allreduce, reduce_scatter, alltoall, barrier; or all")
      ->capture_default_str();
  run->add_option("--sizes", arguments.sizes,
                  "comma-separated bytes per rank (what one rank contributes or receives, as "
                  "MPI counts), with K, M or G suffixes; rounded down to whole elements")
      ->capture_default_str();
  run->add_option("--datatype", arguments.datatype,
                  "int8, uint8, int32, int64, float16, bfloat16, float32 or float64, or a "
                  "comma-separated list of them to run every op in each")
      ->capture_default_str();
  run->add_option("--reduce-op", arguments.reduce_op,
                  "reduction of reduce, allreduce and reduce_scatter: sum, max or min")
      ->capture_default_str();
  run->add_option("--iters", arguments.iters, "runs of each op and size")
      ->check(client::Decimal())
      ->capture_default_str();
  run->add_option("--root", arguments.root,
                  "root rank of bcast, scatter, gather and reduce, or 'all' to run them with "
                  "every root in turn")
      ->capture_default_str();
  run->add_flag("--in-place", arguments.in_place,
                "run the in-place form (MPI_IN_PLACE) of every op that has one");
  run->add_option("--algorithm", arguments.algorithm,
                  "algorithm to force for every op but sendrecv, or 'all' to run each op with "
                  "every algorithm it has in turn (default: the daemon's policy)");
  run->add_option("--join-timeout", arguments.join_timeout_seconds,
                  "seconds to wait for all ranks to join")
      ->check(client::Seconds(0.001, 86400))
      ->capture_default_str();
  run->add_option("--op-timeout", arguments.op_timeout_seconds,
                  "op deadline in seconds (0: the daemon's default)")
      ->check(client::Seconds(0, 86400))
      ->capture_default_str();
  run->add_flag("--table", arguments.table,
                "print `op algorithm datatype root bytes time_us GB/s ok`, a row per run (ok: "
                "this rank's own checks)");

  if (std::optional<int> code = client::ParseCommandLine(app, argc, argv, out, err)) return *code;
  if (app.get_subcommands().empty()) return client::CommandRequired(app, err);
  const absl::Duration attach_timeout = absl::Seconds(attach_timeout_seconds);
  if (token->parsed()) return Report(PrintToken(token_runtime_dir, attach_timeout, out), err);
  absl::StatusOr<RunOptions> options = ValidateRunArguments(arguments);
  if (!options.ok()) {
    err << "cclo-run: " << options.status().message() << "\n";
    return client::kUsageExitCode;
  }
  return Report(RunChecks(*options, attach_timeout, out), err);
}

}  // namespace cclo::run
