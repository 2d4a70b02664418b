#include "bench/baselines.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/e2e/cluster.h"

namespace cclo::bench {
namespace {

// The rank program's arguments for `ops` (those of options it runs) and the sizes.
std::vector<std::string> SweepArguments(const BenchOptions& options, const std::vector<Op>& ops) {
  std::vector<std::string> names;
  for (Op op : ops) names.push_back(OpName(op));
  std::vector<std::string> arguments = {
      "--ops",    absl::StrJoin(names, ","),    "--sizes", absl::StrJoin(options.sizes, ","),
      "--warmup", absl::StrCat(options.warmup), "--iters", absl::StrCat(options.iters)};
  if (options.check) arguments.push_back("--check");
  return arguments;
}

std::vector<Op> Supported(const BenchOptions& options, const std::vector<Op>& supported) {
  std::vector<Op> ops;
  for (Op op : options.ops) {
    if (std::find(supported.begin(), supported.end(), op) != supported.end()) ops.push_back(op);
  }
  return ops;
}

absl::Status Failed(const std::string& what, const testing::ProcessResult& result) {
  return absl::InternalError(absl::StrCat(what,
                                          result.timed_out ? " passed the deadline" : " failed",
                                          " (exit code ", result.exit_code, "):\n", result.output));
}

// A port no one listens on now (the kernel's choice for port 0).
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (fd >= 0) close(fd);
  if (!ok) return absl::InternalError("cannot bind a loopback port");
  return ntohs(address.sin_port);
}

// The number after `"key":` following `section` in iperf3's JSON, or 0.
double JsonNumber(const std::string& json, const std::string& section, const std::string& key) {
  const size_t at = json.find("\"" + section + "\"");
  if (at == std::string::npos) return 0;
  const size_t field = json.find("\"" + key + "\":", at);
  if (field == std::string::npos) return 0;
  return std::strtod(json.c_str() + field + key.size() + 3, nullptr);
}

// iperf3's received bytes per second in each of `sums` (JSON sections) of one run.
absl::StatusOr<std::vector<double>> RunIperf3(double seconds, bool bidir,
                                              const std::vector<std::string>& sums) {
  absl::StatusOr<int> port = FreePort();
  if (!port.ok()) return port.status();
  testing::Process server({"/usr/bin/iperf3", "--server", "--one-off", "--bind", "127.0.0.1",
                           "--port", absl::StrCat(*port), "--forceflush"});
  if (!server.WaitForOutput("Server listening", absl::Seconds(10))) {
    return absl::InternalError(absl::StrCat("iperf3 server did not start:\n", server.Output()));
  }
  std::vector<std::string> command = {"/usr/bin/iperf3",     "--client", "127.0.0.1", "--port",
                                      absl::StrCat(*port),   "--len",    "1M",        "--time",
                                      absl::StrCat(seconds), "--json"};
  if (bidir) command.push_back("--bidir");
  testing::ProcessResult client = testing::Process(command).Wait(absl::Seconds(seconds + 30));
  if (client.exit_code != 0) return Failed("iperf3 client", client);
  std::vector<double> rates;
  for (const std::string& sum : sums) {
    const double bits_per_second = JsonNumber(client.output, sum, "bits_per_second");
    if (bits_per_second <= 0) {
      return absl::InternalError(
          absl::StrCat("no ", sum, " rate in iperf3's output:\n", client.output));
    }
    rates.push_back(bits_per_second / 8);
  }
  return rates;
}

}  // namespace

absl::StatusOr<Timings> RunMpiSweep(const BenchOptions& options) {
  const std::vector<Op> ops =
      Supported(options, {Op::kSendRecv, Op::kSend, Op::kBcast, Op::kReduce, Op::kAllreduce,
                          Op::kAllgather, Op::kReduceScatter, Op::kAlltoall});
  if (ops.empty()) return Timings{};
  std::vector<std::string> command = {"/usr/bin/mpirun",
                                      "-np",
                                      absl::StrCat(options.ranks()),
                                      "--oversubscribe",
                                      "--bind-to",
                                      "none",
                                      "--mca",
                                      "pml",
                                      "ob1",
                                      "--mca",
                                      "btl",
                                      "self,tcp",
                                      "--mca",
                                      "btl_tcp_if_include",
                                      "lo"};
  if (geteuid() == 0) command.push_back("--allow-run-as-root");
  command.push_back(testing::Runfile("bench/mpi-bench"));
  for (std::string& argument : SweepArguments(options, ops)) command.push_back(argument);
  testing::ProcessResult result = testing::Process(command).Wait(options.deadline);
  if (result.exit_code != 0) return Failed("mpirun", result);
  Timings timings;
  if (absl::Status status = AddTimes(result.output, timings); !status.ok()) return status;
  return timings;
}

absl::StatusOr<Timings> RunGlooSweep(const BenchOptions& options) {
  const std::vector<Op> ops = Supported(options, {Op::kBcast, Op::kAllreduce, Op::kAllgather});
  if (ops.empty()) return Timings{};
  char store_template[] = "/tmp/cclo-gloo.XXXXXX";
  if (mkdtemp(store_template) == nullptr) return absl::InternalError("cannot make a store dir");
  const std::string store = store_template;
  std::vector<std::vector<std::string>> commands;
  for (uint32_t rank = 0; rank < options.ranks(); ++rank) {
    std::vector<std::string> command = {testing::Runfile("bench/gloo-bench"),
                                        "--rank",
                                        absl::StrCat(rank),
                                        "--size",
                                        absl::StrCat(options.ranks()),
                                        "--store-dir",
                                        store};
    for (std::string& argument : SweepArguments(options, ops)) command.push_back(argument);
    commands.push_back(std::move(command));
  }
  std::vector<testing::ProcessResult> ranks = testing::RunAll(commands, options.deadline);
  std::filesystem::remove_all(store);
  Timings timings;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    if (ranks[rank].exit_code != 0) return Failed(absl::StrCat("gloo rank ", rank), ranks[rank]);
    if (absl::Status status = AddTimes(ranks[rank].output, timings); !status.ok()) return status;
  }
  return timings;
}

absl::StatusOr<LinkRates> RunLink(double seconds) {
  absl::StatusOr<std::vector<double>> one_way = RunIperf3(seconds, false, {"sum_received"});
  if (!one_way.ok()) return one_way.status();
  absl::StatusOr<std::vector<double>> both_ways =
      RunIperf3(seconds, true, {"sum_received", "sum_received_bidir_reverse"});
  if (!both_ways.ok()) return both_ways.status();
  return LinkRates{.one_way = (*one_way)[0], .duplex = ((*both_ways)[0] + (*both_ways)[1]) / 2};
}

}  // namespace cclo::bench
