// cclo-bench: collective bandwidth and latency of cclod in the style of nccl-tests and
// OSU, beside Open MPI, Gloo and the loopback link measured in the same run (DESIGN 14;
// docs/performance.md).
//
//   bazel build //bench:cclo-bench
//   bazel-bin/bench/cclo-bench --daemons 2 --baseline mpi --baseline gloo --baseline link
//
// Starts its own daemons on loopback (tests/e2e/cluster.h) unless --runtime-dirs names
// running ones. Each rank is a separate process: this binary, re-invoked as
// `cclo-bench worker ...` (bench/cclo_worker.h).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/baselines.h"
#include "bench/cclo_sweep.h"
#include "bench/cclo_worker.h"
#include "bench/daemon_pid.h"
#include "bench/report.h"
#include "client/cli.h"
#include "hw/poe/tcp/engine.h"
#include "hw/types.h"
#include "tests/e2e/cluster.h"

namespace cclo::bench {
namespace {

// The kernel's TCP congestion control, which the sockets of every stack measured here use
// but cclod's data sessions under --data-tcp-congestion (BBR's pacing slows loopback
// transfers: docs/performance-log.md).
std::string CongestionControl() { return hw::poe::tcp::Ipv4Setting("tcp_congestion_control"); }

// Prints a failure's message; returns the exit code for it (0 for OK).
int Fail(const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "cclo-bench: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Worker(int argc, char** argv) {
  CLI::App app{"one rank of a cclo-bench sweep (started by cclo-bench)", "cclo-bench worker"};
  WorkerOptions options;
  std::string ops, sizes, datatype, pids;
  app.add_option("--runtime-dir", options.runtime_dir)->required();
  app.add_option("--token", options.token)->required();
  app.add_option("--rank", options.rank)->required();
  app.add_option("--size", options.size)->required();
  app.add_option("--ops", ops)->required();
  app.add_option("--sizes", sizes)->required();
  app.add_option("--warmup", options.warmup)->required();
  app.add_option("--iters", options.iters)->required();
  app.add_option("--datatype", datatype)->required();
  app.add_option("--daemon-pids", pids)->required();
  app.add_flag("--check", options.check);
  app.add_option("--algorithm", options.algorithm);
  if (auto code = client::ParseCommandLine(app, argc, argv, std::cout, std::cerr)) return *code;
  absl::StatusOr<std::vector<Op>> parsed_ops = ParseOps(ops);
  if (!parsed_ops.ok()) return Fail(parsed_ops.status());
  options.ops = *parsed_ops;
  absl::StatusOr<std::vector<uint64_t>> parsed_sizes = ParseSizeList(sizes);
  if (!parsed_sizes.ok()) return Fail(parsed_sizes.status());
  options.sizes = *parsed_sizes;
  absl::StatusOr<hw::DataType> parsed_datatype = hw::ParseDataType(datatype);
  if (!parsed_datatype.ok()) return Fail(parsed_datatype.status());
  options.datatype = *parsed_datatype;
  for (absl::string_view pid : absl::StrSplit(pids, ',', absl::SkipEmpty())) {
    options.daemon_pids.push_back(0);
    if (!absl::SimpleAtoi(pid, &options.daemon_pids.back())) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--daemon-pids: '", pid, "'")));
    }
  }
  absl::Status status = RunWorker(options);
  return status.ok() ? 0 : Fail(status);
}

absl::StatusOr<BenchOptions> ParseArguments(int argc, char** argv, std::optional<int>& exit_code) {
  CLI::App app{
      "cclo-bench: collective bandwidth and latency of cclod beside Open MPI, Gloo "
      "and the link",
      "cclo-bench"};
  BenchArguments arguments;
  app.add_option("--ops", arguments.ops,
                 "comma-separated ops: sendrecv, send, bcast, reduce, allreduce, allgather, "
                 "reduce_scatter, alltoall, nop (through the command ring), nop_grpc (through "
                 "the Submit and Wait RPCs); or all")
      ->capture_default_str();
  app.add_option("--min-bytes", arguments.min_bytes, "smallest size (K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("--max-bytes", arguments.max_bytes, "largest size")->capture_default_str();
  app.add_option("--step-factor", arguments.step_factor, "2 or 4: each size is the last times it")
      ->check(client::Decimal(std::numeric_limits<uint64_t>::max()))
      ->capture_default_str();
  app.add_option("--daemons", arguments.daemons, "daemons to start on loopback (default 2)")
      ->check(client::Decimal());
  app.add_option("--ranks-per-daemon", arguments.ranks_per_daemon, "client processes per daemon")
      ->check(client::Decimal())
      ->capture_default_str();
  app.add_option("--runtime-dirs", arguments.runtime_dirs,
                 "comma-separated runtime dirs of running daemons to use instead");
  app.add_option("--data-tcp-congestion", arguments.data_tcp_congestion,
                 "TCP congestion control of the started daemons' data sessions (their "
                 "data_tcp_congestion); default: the host's, as every other stack's");
  app.add_option("--warmup", arguments.warmup, "untimed iterations per size")
      ->check(client::Decimal())
      ->capture_default_str();
  app.add_option("--iters", arguments.iters, "timed iterations per size")
      ->check(client::Decimal())
      ->capture_default_str();
  app.add_option("--rounds", arguments.rounds,
                 "run every stack's sweep this many times, the stacks in turn, and pool the "
                 "timed iterations (this machine's speed drifts over minutes)")
      ->check(client::Decimal())
      ->capture_default_str();
  app.add_flag("--check", arguments.check, "check every result (fills and checks are not timed)");
  app.add_option("--datatype", arguments.datatype,
                 "elements' datatype: int8, uint8, int32, int64, float16, bfloat16, float32 or "
                 "float64 (reductions sum); Open MPI and Gloo run float32 only")
      ->capture_default_str();
  app.add_option("--algorithm", arguments.algorithm,
                 "force this algorithm on every collective op (docs/algorithms.md); default: "
                 "the daemons' choice");
  app.add_option("--baseline", arguments.baselines,
                 "mpi, gloo or link; repeat for several (run after cclod's sweep)");
  app.add_option("--link-seconds", arguments.link_seconds, "iperf3's run time")
      ->check(client::Seconds(1, 600))
      ->capture_default_str();
  app.add_option("--deadline", arguments.deadline_seconds,
                 "seconds each stack's sweep may take; its processes are killed past it")
      ->check(client::Seconds(0.001, 86400))
      ->capture_default_str();
  exit_code = client::ParseCommandLine(app, argc, argv, std::cout, std::cerr);
  if (exit_code) return absl::CancelledError();
  return ValidateBenchArguments(arguments);
}

// Our sweep on the daemons of `options` (started here unless it names running ones).
absl::StatusOr<CcloResults> RunOurs(const BenchOptions& options, const std::string& self) {
  std::vector<std::unique_ptr<testing::Daemon>> started;
  std::vector<std::string> runtime_dirs = options.runtime_dirs;
  for (uint32_t i = 0; options.runtime_dirs.empty() && i < options.daemons; ++i) {
    started.push_back(std::make_unique<testing::Daemon>(
        options.data_tcp_congestion.empty()
            ? ""
            : absl::StrCat("data_tcp_congestion: ", options.data_tcp_congestion, "\n")));
    // The harness starts daemons logging at debug level, a log line per op and segment.
    testing::ProcessResult quiet = testing::Ccloctl(*started.back(), {"log-level", "info"});
    if (quiet.exit_code != 0) {
      return absl::InternalError(absl::StrCat("ccloctl log-level info failed:\n", quiet.output));
    }
    runtime_dirs.push_back(started.back()->runtime_dir());
  }
  std::vector<pid_t> pids;
  for (const std::string& dir : runtime_dirs) {
    absl::StatusOr<pid_t> pid = DaemonPid(dir);
    if (!pid.ok()) return pid.status();
    pids.push_back(*pid);
  }
  return RunCcloSweep(options, runtime_dirs, pids, self);
}

int Main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "worker") return Worker(argc - 1, argv + 1);
  std::optional<int> exit_code;
  absl::StatusOr<BenchOptions> options = ParseArguments(argc, argv, exit_code);
  if (exit_code) return *exit_code;
  if (!options.ok()) {
    std::fprintf(stderr, "cclo-bench: %s\n", std::string(options.status().message()).c_str());
    return client::kUsageExitCode;
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  setenv("TEST_SRCDIR", (self + ".runfiles").c_str(), 0);  // where cluster.h finds cclod
  Measurements measurements;
  // A baseline that fails is reported and left out of its round; ours still prints.
  bool baselines_ok = true;
  for (uint32_t i = 0; i < options->rounds; ++i) {
    Measurements round;
    absl::StatusOr<CcloResults> ours = RunOurs(*options, self);
    if (!ours.ok()) return Fail(ours.status());
    round.cclo = *std::move(ours);
    for (Baseline baseline : options->baselines) {
      if (baseline == Baseline::kLink) {
        absl::StatusOr<LinkRates> link = RunLink(options->link_seconds);
        if (link.ok()) {
          round.link = *link;
          round.link_runs = 1;
        }
        baselines_ok = Fail(link.status()) == 0 && baselines_ok;
        continue;
      }
      absl::StatusOr<Timings> theirs =
          baseline == Baseline::kMpi ? RunMpiSweep(*options) : RunGlooSweep(*options);
      if (theirs.ok()) round.stacks[baseline] = *std::move(theirs);
      baselines_ok = Fail(theirs.status()) == 0 && baselines_ok;
    }
    Pool(measurements, std::move(round));
  }
  std::printf(
      "cclo-bench: %u ranks on %u daemons (%u per daemon), %s, %s sum; "
      "%u warm-up and %u timed iterations per size%s; algorithm: %s\n",
      options->ranks(), options->daemons, options->ranks_per_daemon,
      options->runtime_dirs.empty() ? "loopback" : "daemons of --runtime-dirs",
      std::string(hw::DataTypeName(options->datatype)).c_str(), options->warmup, options->iters,
      options->rounds == 1 ? ""
                           : absl::StrCat(" in each of ", options->rounds,
                                          " rounds (the stacks' sweeps in turn, iterations pooled)")
                                 .c_str(),
      options->algorithm.empty() ? "the daemons' choice" : options->algorithm.c_str());
  std::printf(
      "times: the slowest rank's per iteration; bandwidths from p50 (GB = 1e9 bytes); "
      "x<stack>: their p50 / ours (above 1: cclod is faster)\n");
  if (options->data_tcp_congestion.empty()) {
    std::printf("tcp congestion control: %s (net.ipv4.tcp_congestion_control, every stack's)\n",
                CongestionControl().c_str());
  } else {
    std::printf(
        "tcp congestion control: cclod's data sessions %s (--data-tcp-congestion); every other "
        "socket %s (net.ipv4.tcp_congestion_control)\n",
        options->data_tcp_congestion.c_str(), CongestionControl().c_str());
  }
  for (Baseline baseline : options->baselines) {
    auto ran = measurements.stack_rounds.find(baseline);
    if (baseline == Baseline::kLink ||
        (ran != measurements.stack_rounds.end() && ran->second == options->rounds)) {
      continue;
    }
    if (ran == measurements.stack_rounds.end()) {
      std::printf("%s: its sweep failed in every round\n", BaselineName(baseline).c_str());
    } else {
      std::printf("%s: pooled over %u of %u rounds (its sweep failed in the others)\n",
                  BaselineName(baseline).c_str(), ran->second, options->rounds);
    }
  }
  if (measurements.link.one_way > 0) {
    std::string runs;
    if (options->rounds > 1) {
      const uint32_t failed = options->rounds - measurements.link_runs;
      runs = absl::StrCat(" (the mean of ", measurements.link_runs, " runs",
                          failed == 0 ? "" : absl::StrCat("; iperf3 failed in ", failed, " more"),
                          ")");
    }
    std::printf(
        "link: iperf3 on loopback, 1 MiB writes: one stream %.3f GB/s; one stream each way "
        "at once (--bidir) %.3f GB/s per direction%s\n",
        measurements.link.one_way / 1e9, measurements.link.duplex / 1e9, runs.c_str());
  } else if (std::find(options->baselines.begin(), options->baselines.end(), Baseline::kLink) !=
             options->baselines.end()) {
    std::printf("link: iperf3 failed in every round\n");
  }
  std::printf("\n%s", RenderReport(*options, measurements).c_str());
  if (const std::string geomeans = RenderGeomeans(measurements); !geomeans.empty()) {
    std::printf("\ngeometric means of x<stack> over the sizes from %llu MiB:\n%s",
                static_cast<unsigned long long>(kGeomeanFromBytes >> 20), geomeans.c_str());
  }
  for (const auto& [key, check] : measurements.cclo.checks) {
    if (check != "ok")
      return Fail(
          absl::DataLossError(absl::StrCat(OpName(key.first), " ", key.second, ": ", check)));
  }
  return baselines_ok ? 0 : 1;
}

}  // namespace
}  // namespace cclo::bench

int main(int argc, char** argv) { return cclo::bench::Main(argc, argv); }
