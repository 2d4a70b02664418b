// tenant_isolation: how much one tenant's big allreduces delay another tenant's small ones.
//
// Starts two cclod daemons on loopback (tests/e2e/cluster.h) and runs, as client processes
// with one rank on each daemon:
//   tenant A (this uid): float32 allreduces of --big-bytes (32 MiB) in a loop;
//   tenant B (uid nobody, through setpriv): --iterations float32 allreduces of
//   --small-bytes (1 KiB), each timed on rank 0 from submission to completion.
// Three runs: B alone, B beside A with fair scheduling (DRR), B beside A with FIFO; then
// B's p50 and p99 latency for each, their ratios and A's throughput. The daemons are
// started twice, once per `scheduler` (drr, fifo); tenants "big" (uid 0) and "small"
// (nobody) weigh 1 each. Needs root (B runs as another uid).
//
//   bazel run //bench:tenant_isolation -- [--iterations 1000]
//
// The same binary is the client ("worker ..." arguments), copied to a world-readable
// directory so that uid nobody can run it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/sweep.h"
#include "cclo/client.h"
#include "tests/e2e/cluster.h"

namespace cclo::bench {
namespace {

using testing::Daemon;
using testing::Process;

/// Rank 0 of tenant A adds this to its first element to tell both ranks to stop.
constexpr float kStopMark = 1e6f;

std::map<std::string, std::string> ParseFlags(int argc, char** argv, int first) {
  std::map<std::string, std::string> flags;
  for (int i = first; i + 1 < argc; i += 2) flags[std::string(argv[i]).substr(2)] = argv[i + 1];
  return flags;
}

uint64_t Number(const std::map<std::string, std::string>& flags, const std::string& name,
                uint64_t fallback) {
  uint64_t value = fallback;
  auto it = flags.find(name);
  if (it != flags.end() && !absl::SimpleAtoi(it->second, &value)) {
    std::fprintf(stderr, "--%s %s is not a number\n", name.c_str(), it->second.c_str());
    std::exit(2);
  }
  return value;
}

/// One rank of one tenant. With --iterations: that many timed allreduces, then prints
/// "latency_us p50 P p99 Q". Without: allreduces until --stop-file exists (seen by rank 0),
/// then prints "ops N seconds S". Prints "running" after the first allreduce.
int Worker(const std::map<std::string, std::string>& flags) {
  const uint32_t rank = static_cast<uint32_t>(Number(flags, "rank", 0));
  const uint64_t bytes = Number(flags, "bytes", 1024);
  const uint64_t iterations = Number(flags, "iterations", 0);
  auto fail = [](const absl::Status& status) {
    std::fprintf(stderr, "worker: %s\n", status.ToString().c_str());
    return 1;
  };
  auto client = Client::Attach(flags.at("runtime-dir"));
  if (!client.ok()) return fail(client.status());
  auto comm = (*client)->Join(flags.at("token"), rank, 2);
  if (!comm.ok()) return fail(comm.status());
  auto send = (*client)->AllocBuffer(bytes);
  auto recv = (*client)->AllocBuffer(bytes);
  if (!send.ok() || !recv.ok()) return fail(send.ok() ? recv.status() : send.status());
  std::span<float> input = send->span<float>();
  std::fill(input.begin(), input.end(), 1.0f);
  const uint64_t count = bytes / sizeof(float);
  std::vector<double> latencies;
  uint64_t ops = 0;
  const absl::Time start = absl::Now();
  for (;;) {
    if (iterations == 0 && rank == 0 && std::filesystem::exists(flags.at("stop-file"))) {
      input[0] = kStopMark;
    }
    const absl::Time before = absl::Now();
    absl::Status status =
        (*comm)->Allreduce(*send, *recv, count, DataType::kFloat32, ReduceOp::kSum);
    if (!status.ok()) return fail(status);
    latencies.push_back(absl::ToDoubleMicroseconds(absl::Now() - before));
    if (++ops == 1) {
      std::printf("running\n");
      std::fflush(stdout);
    }
    if (iterations > 0 ? ops == iterations : recv->span<float>()[0] >= kStopMark) break;
  }
  if (iterations > 0) {
    std::printf("latency_us p50 %.1f p99 %.1f\n", Percentile(latencies, 0.5),
                Percentile(latencies, 0.99));
  } else {
    std::printf("ops %lu seconds %.3f\n", static_cast<unsigned long>(ops),
                absl::ToDoubleSeconds(absl::Now() - start));
  }
  return 0;
}

struct Outcome {
  double p50_us = 0;
  double p99_us = 0;
  double big_per_second = 0;  ///< tenant A's allreduces per second, 0 without A
};

/// The text after `label` in `output`, parsed as a double (0 if missing).
double After(const std::string& output, const std::string& label) {
  const size_t at = output.find(label);
  double value = 0;
  if (at != std::string::npos) std::sscanf(output.c_str() + at + label.size(), "%lf", &value);
  return value;
}

class Bench {
 public:
  Bench(std::string worker, uint64_t iterations, uint64_t small_bytes, uint64_t big_bytes)
      : worker_(std::move(worker)),
        iterations_(iterations),
        small_bytes_(small_bytes),
        big_bytes_(big_bytes) {}

  /// B's latency on `daemons`, beside A or not; an error carries a failed client's output.
  absl::StatusOr<Outcome> Run(const std::vector<Daemon*>& daemons, bool with_big) {
    Outcome outcome;
    const std::string stop_file = absl::StrCat(daemons[0]->runtime_dir(), "/stop");
    std::vector<std::unique_ptr<Process>> big;
    if (with_big) {
      const std::string token = testing::NewToken(*daemons[0]);
      for (uint32_t rank = 0; rank < 2; ++rank) {
        big.push_back(std::make_unique<Process>(
            Command({}, *daemons[rank], token, rank, big_bytes_, 0, stop_file)));
      }
      for (auto& process : big) {
        if (!process->WaitForOutput("running", absl::Minutes(2))) return Failed(process->Output());
      }
    }
    const std::string token = testing::NewToken(*daemons[0]);
    const std::vector<std::string> nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                             "--clear-groups"};
    std::vector<std::vector<std::string>> small;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      small.push_back(Command(nobody, *daemons[rank], token, rank, small_bytes_, iterations_, ""));
    }
    std::vector<testing::ProcessResult> results = testing::RunAll(small, absl::Minutes(30));
    for (const auto& result : results) {
      if (result.exit_code != 0) return Failed(result.output);
    }
    outcome.p50_us = After(results[0].output, "p50 ");
    outcome.p99_us = After(results[0].output, "p99 ");
    if (with_big) {
      FILE* stop = std::fopen(stop_file.c_str(), "w");
      if (stop != nullptr) std::fclose(stop);
      testing::ProcessResult result = big[0]->Wait(absl::Minutes(2));
      big[1]->Wait(absl::Minutes(2));
      if (result.exit_code != 0) return Failed(result.output);
      const double seconds = After(result.output, "seconds ");
      outcome.big_per_second = seconds > 0 ? After(result.output, "ops ") / seconds : 0;
    }
    return outcome;
  }

 private:
  std::vector<std::string> Command(std::vector<std::string> launcher, const Daemon& daemon,
                                   const std::string& token, uint32_t rank, uint64_t bytes,
                                   uint64_t iterations, const std::string& stop_file) const {
    launcher.insert(launcher.end(),
                    {worker_, "worker", "--runtime-dir", daemon.runtime_dir(), "--token", token,
                     "--rank", std::to_string(rank), "--bytes", std::to_string(bytes),
                     "--iterations", std::to_string(iterations), "--stop-file", stop_file});
    return launcher;
  }

  static absl::Status Failed(const std::string& output) {
    return absl::InternalError(absl::StrCat("a client failed:\n", output));
  }

  const std::string worker_;
  const uint64_t iterations_, small_bytes_, big_bytes_;
};

/// Two daemons scheduling in `mode` ("drr" or "fifo") between tenant "big" (uid 0) and
/// tenant "small" (uid nobody), their runtime dirs open to every uid.
std::vector<std::unique_ptr<Daemon>> StartDaemons(const std::string& mode) {
  const std::string config = absl::StrCat("scheduler: ", mode,
                                          "\ndefault_tenant: big\ntenants:\n"
                                          "  - {name: big, uids: [0]}\n"
                                          "  - {name: small, uids: [65534]}\n");
  std::vector<std::unique_ptr<Daemon>> daemons;
  for (int i = 0; i < 2; ++i) {
    daemons.push_back(std::make_unique<Daemon>(config));
    const std::filesystem::path run = daemons.back()->runtime_dir();
    chmod(run.parent_path().c_str(), 0755);
    chmod(run.c_str(), 0755);
  }
  return daemons;
}

/// A copy of this binary that every uid may run.
std::string PublicCopy() {
  char dir_template[] = "/tmp/cclo-bench.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  chmod(dir.c_str(), 0755);
  const std::string copy = dir + "/tenant_isolation";
  std::filesystem::copy_file("/proc/self/exe", copy);
  chmod(copy.c_str(), 0755);
  return copy;
}

int Main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "worker") return Worker(ParseFlags(argc, argv, 2));
  const std::map<std::string, std::string> flags = ParseFlags(argc, argv, 1);
  if (geteuid() != 0) {
    std::fprintf(stderr, "tenant_isolation runs tenant B as uid nobody: run it as root\n");
    return 2;
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  setenv("TEST_SRCDIR", (self + ".runfiles").c_str(), 0);  // where cluster.h finds cclod
  const uint64_t small_bytes = Number(flags, "small-bytes", 1024);
  const uint64_t big_bytes = Number(flags, "big-bytes", 32ull << 20);
  const std::string worker = PublicCopy();
  Bench bench(worker, Number(flags, "iterations", 1000), small_bytes, big_bytes);
  absl::StatusOr<Outcome> alone, fair, fifo;
  {
    auto daemons = StartDaemons("drr");
    alone = bench.Run({daemons[0].get(), daemons[1].get()}, false);
    if (alone.ok()) fair = bench.Run({daemons[0].get(), daemons[1].get()}, true);
  }
  if (fair.ok()) {
    auto daemons = StartDaemons("fifo");
    fifo = bench.Run({daemons[0].get(), daemons[1].get()}, true);
  }
  std::filesystem::remove_all(std::filesystem::path(worker).parent_path());
  for (const auto* outcome : {&alone, &fair, &fifo}) {
    if (!outcome->ok()) {
      std::fprintf(stderr, "%s\n", std::string(outcome->status().message()).c_str());
      return 1;
    }
  }
  std::printf(
      "tenant B: %lu-byte float32 allreduces; tenant A: %lu-byte float32 allreduces;\n"
      "2 daemons on loopback, one rank of each tenant on each\n\n",
      static_cast<unsigned long>(small_bytes), static_cast<unsigned long>(big_bytes));
  std::printf("%-18s %12s %12s %16s\n", "run", "B p50 (us)", "B p99 (us)", "A allreduce/s");
  auto row = [](const char* name, const Outcome& outcome) {
    std::printf("%-18s %12.1f %12.1f %16.2f\n", name, outcome.p50_us, outcome.p99_us,
                outcome.big_per_second);
  };
  row("B alone", *alone);
  row("B + A, drr", *fair);
  row("B + A, fifo", *fifo);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  std::printf("\nfifo / drr:    p50 %.2fx  p99 %.2fx\n", ratio(fifo->p50_us, fair->p50_us),
              ratio(fifo->p99_us, fair->p99_us));
  std::printf("drr / alone:   p50 %.2fx  p99 %.2fx\n", ratio(fair->p50_us, alone->p50_us),
              ratio(fair->p99_us, alone->p99_us));
  return 0;
}

}  // namespace
}  // namespace cclo::bench

int main(int argc, char** argv) { return cclo::bench::Main(argc, argv); }
