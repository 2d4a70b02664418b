// The op metrics follow the work: two real daemons run a known set of ops (forced
// algorithms, two sizes, an op past its deadline and one that waited for it), then their
// expositions and `ccloctl stats --json` must count exactly those ops, bytes and errors,
// promtool must accept the expositions, and docs/operations.md must list every metric family
// with its type and labels. The data sessions to peers are counted by state as they come up,
// the peer leaves and the peer dies.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cclo/client.h"
#include "cclo/v1/admin.pb.h"
#include "cclo/v1/attach.h"
#include "cclo/v1/ring.h"
#include "firmware/registry.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "hw/poe/wire.h"
#include "hw/process.h"
#include "hw/types.h"
#include "tests/e2e/alone.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/pairs.h"

namespace cclo::testing {
namespace {

using Samples = std::map<std::string, double>;

/// Every sample of an exposition, by series (name and labels as exposed).
Samples Parse(const std::string& exposition) {
  Samples samples;
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

/// The samples of one series name (without the _bucket series of a histogram).
Samples Named(const Samples& samples, const std::string& name) {
  Samples named;
  for (const auto& [series, value] : samples) {
    if (series == name || absl::StartsWith(series, name + "{")) named[series] = value;
  }
  return named;
}

std::string Ops(const std::string& labels, const char* result) {
  return "cclod_ops_total{tenant=\"default\"," + labels + ",result=\"" + result + "\"}";
}

std::string Bytes(const std::string& labels) {
  return "cclod_op_bytes_total{tenant=\"default\"," + labels + "}";
}

/// The cclod_peer_sessions samples for `connecting`, `up`, `left` and `lost` sessions.
Samples PeerSessions(int connecting, int up, int left, int lost) {
  return {{"cclod_peer_sessions{state=\"connecting\"}", connecting},
          {"cclod_peer_sessions{state=\"up\"}", up},
          {"cclod_peer_sessions{state=\"left\"}", left},
          {"cclod_peer_sessions{state=\"lost\"}", lost}};
}

/// A communicator of rank 0 on `daemons[0]` and rank 1 on `daemons[1]`.
struct Pair {
  std::unique_ptr<Client> clients[2];
  std::unique_ptr<Communicator> comms[2];
};

/// Attaches a client to each daemon and joins them, then runs `work(rank)` on each rank
/// side by side.
void JoinAndRun(Daemon (&daemons)[2], Pair& pair, const std::function<void(int)>& work) {
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemons[rank].runtime_dir());
    ASSERT_TRUE(client.ok()) << client.status();
    pair.clients[rank] = *std::move(client);
  }
  absl::StatusOr<std::string> token = pair.clients[0]->CreateCommunicatorId();
  ASSERT_TRUE(token.ok()) << token.status();
  auto run_rank = [&](int rank) {
    absl::StatusOr<std::unique_ptr<Communicator>> comm = pair.clients[rank]->Join(*token, rank, 2);
    ASSERT_TRUE(comm.ok()) << comm.status();
    pair.comms[rank] = *std::move(comm);
    work(rank);
  };
  std::thread rank1(run_rank, 1);
  run_rank(0);
  rank1.join();
  ASSERT_TRUE(pair.comms[0] && pair.comms[1]);
}

/// (collective, algorithm, protocol) -> ops OK, ops failed, bytes.
using StatsRows = std::map<std::tuple<std::string, std::string, std::string>,
                           std::tuple<uint64_t, uint64_t, uint64_t>>;

v1::StatsResponse StatsJson(const Daemon& daemon) {
  const ProcessResult result = Ccloctl(daemon, {"stats", "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  v1::StatsResponse stats;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.output, &stats).ok())
      << result.output;
  return stats;
}

StatsRows Rows(const v1::StatsResponse& stats) {
  StatsRows rows;
  for (const v1::OpStats& row : stats.ops()) {
    EXPECT_EQ(row.tenant(), "default");
    rows[{row.collective(), row.algorithm(), row.protocol()}] = {row.ops_ok(), row.ops_failed(),
                                                                 row.bytes()};
    if (row.ops_ok() > 0) {
      EXPECT_GT(row.latency_p50_seconds(), 0) << row.ShortDebugString();
      EXPECT_LE(row.latency_p50_seconds(), row.latency_p99_seconds()) << row.ShortDebugString();
    }
  }
  return rows;
}

/// The `le` labels of an exposition's histogram buckets that are not written as the decimal
/// their bound is (at most 7 digits), such as 0.0006400000000000001 for 0.00064: a query
/// naming `le="0.00064"` would match nothing.
std::set<std::string> NoisyBounds(const std::string& exposition) {
  std::set<std::string> noisy;
  for (size_t at = exposition.find("le=\""); at != std::string::npos;
       at = exposition.find("le=\"", at + 1)) {
    const size_t start = at + 4;
    const std::string bound = exposition.substr(start, exposition.find('"', start) - start);
    if (bound != "+Inf" && absl::StrFormat("%.7g", std::stod(bound)) != bound) {
      noisy.insert(bound);
    }
  }
  return noisy;
}

/// promtool's verdict on an exposition.
ProcessResult PromtoolCheck(const std::string& exposition, const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << exposition;
  return Process({"/bin/sh", "-c", "exec promtool check metrics < " + path})
      .Wait(absl::Seconds(60));
}

/// A metric family: its type and the names of its labels (a histogram's `le` and a
/// summary's `quantile` aside).
struct Family {
  std::string type;
  std::set<std::string> labels;
};

/// The families of an exposition, by name, with the labels of their series.
std::map<std::string, Family> ExportedFamilies(const std::string& exposition) {
  std::map<std::string, Family> families;
  const std::regex type_line(R"(# TYPE (\S+) (\S+))");
  const std::regex series(R"((\w+)\{([^}]*)\} )");
  const std::regex label(R"((\w+)=")");
  for (std::sregex_iterator it(exposition.begin(), exposition.end(), type_line), end; it != end;
       ++it) {
    families[(*it)[1]].type = (*it)[2];
  }
  for (std::sregex_iterator it(exposition.begin(), exposition.end(), series), end; it != end;
       ++it) {
    std::string name = (*it)[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (!families.count(name) && absl::EndsWith(name, suffix)) {
        name.resize(name.size() - strlen(suffix));
      }
    }
    const std::string labels = (*it)[2];
    for (std::sregex_iterator at(labels.begin(), labels.end(), label); at != end; ++at) {
      if ((*at)[1] != "le" && (*at)[1] != "quantile") families[name].labels.insert((*at)[1]);
    }
  }
  return families;
}

/// The families docs/operations.md's metrics table lists: every `name{label, ...}` in a
/// row's first cell, with the type in its second.
std::map<std::string, Family> DocumentedFamilies(const std::string& operations_md) {
  std::map<std::string, Family> families;
  const std::string operations = operations_md.substr(operations_md.find("\n## Metrics\n"));
  const std::regex row(R"(\n\| (`\w+.*?) \| (\w+) \|)");
  const std::regex metric(R"(`(\w+)(?:\{([^}]*)\})?`)");
  for (std::sregex_iterator it(operations.begin(), operations.end(), row), end; it != end; ++it) {
    const std::string names = (*it)[1];
    for (std::sregex_iterator at(names.begin(), names.end(), metric); at != end; ++at) {
      Family& family = families[(*at)[1]];
      family.type = (*it)[2];
      for (absl::string_view label : absl::StrSplit((*at)[2].str(), ',', absl::SkipEmpty())) {
        family.labels.insert(std::string(absl::StripAsciiWhitespace(label)));
      }
    }
  }
  return families;
}

constexpr char kRing[] = "collective=\"allreduce\",algorithm=\"ring\",protocol=\"eager\"";
constexpr char kDoubling[] =
    "collective=\"allreduce\",algorithm=\"recursive_doubling\",protocol=\"eager\"";
constexpr char kBcast[] = "collective=\"bcast\",algorithm=\"one_to_all\",protocol=\"eager\"";
constexpr char kRecv[] = "collective=\"recv\",algorithm=\"direct\",protocol=\"eager\"";
constexpr char kNone[] = "collective=\"allreduce\",algorithm=\"none\",protocol=\"eager\"";

// Per rank: 3 ring allreduces of 1024 float32 (4 KiB), 2 recursive-doubling allreduces of
// 65536 int32 (256 KiB), a bcast of 100 float32 (400 B). Then rank 0 alone: a receive that
// nobody sends to (DEADLINE_EXCEEDED in the engine) and an allreduce waiting for it (ABORTED
// before it reaches the engine).
TEST(MetricsTest, CountersFollowTheOps) {
  Daemon daemons[2];
  Pair pair;
  JoinAndRun(daemons, pair, [&](int rank) {
    absl::StatusOr<Buffer> send = pair.clients[rank]->AllocBuffer(1 << 20);
    absl::StatusOr<Buffer> recv = pair.clients[rank]->AllocBuffer(1 << 20);
    ASSERT_TRUE(send.ok() && recv.ok()) << send.status() << recv.status();
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(pair.comms[rank]
                      ->Allreduce(*send, *recv, 1024, DataType::kFloat32, ReduceOp::kSum,
                                  {.algorithm = "ring"})
                      .ok());
    }
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(pair.comms[rank]
                      ->Allreduce(*send, *recv, 65536, DataType::kInt32, ReduceOp::kSum,
                                  {.algorithm = "recursive_doubling"})
                      .ok());
    }
    EXPECT_TRUE(pair.comms[rank]
                    ->Bcast(*recv, 0, 100, DataType::kFloat32, 0, {.algorithm = "one_to_all"})
                    .ok());
  });
  if (HasFatalFailure()) return;
  for (Daemon& daemon : daemons) {
    EXPECT_EQ(Named(Parse(Scrape(daemon)), "cclod_peer_sessions"), PeerSessions(0, 1, 0, 0));
  }

  absl::StatusOr<Buffer> buffer = pair.clients[0]->AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  absl::StatusOr<Request> unmatched = pair.comms[0]->RecvAsync(
      *buffer, 0, 8, DataType::kInt32, 1, 9, {.algorithm = "direct", .timeout = absl::Seconds(1)});
  ASSERT_TRUE(unmatched.ok()) << unmatched.status();
  absl::StatusOr<Request> dependent = pair.comms[0]->AllreduceAsync(
      *buffer, *buffer, 8, DataType::kInt32, ReduceOp::kSum, {.after = {&*unmatched}});
  ASSERT_TRUE(dependent.ok()) << dependent.status();
  EXPECT_EQ(unmatched->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(dependent->Wait().code(), absl::StatusCode::kAborted);
  // Refused once the deadline broke the communicator: no op exists, nothing ends.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(
        pair.comms[0]->Allreduce(*buffer, *buffer, 8, DataType::kInt32, ReduceOp::kSum).code(),
        absl::StatusCode::kUnavailable);
  }

  // The dependent op is counted as it ends, which may come just after its result.
  Samples samples[2];
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int rank = 0; rank < 2; ++rank) samples[rank] = Parse(Scrape(daemons[rank]));
        return samples[0][Ops(kNone, "error")] == 1 &&
               samples[1]["cclod_peer_sessions{state=\"left\"}"] == 1;
      },
      absl::Seconds(30)))
      << Scrape(daemons[0]) << Scrape(daemons[1]);

  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const Samples& got = samples[rank];
    Samples ops = {{Ops(kRing, "ok"), 3},     {Ops(kRing, "error"), 0},
                   {Ops(kDoubling, "ok"), 2}, {Ops(kDoubling, "error"), 0},
                   {Ops(kBcast, "ok"), 1},    {Ops(kBcast, "error"), 0}};
    Samples bytes = {
        {Bytes(kRing), 3 * 4096}, {Bytes(kDoubling), 2 * 262144}, {Bytes(kBcast), 400}};
    Samples errors;
    if (rank == 0) {
      ops.insert({{Ops(kRecv, "ok"), 0},
                  {Ops(kRecv, "error"), 1},
                  {Ops(kNone, "ok"), 0},
                  {Ops(kNone, "error"), 1}});
      bytes.insert({{Bytes(kRecv), 0}, {Bytes(kNone), 0}});
      errors = {{"cclod_op_errors_total{reason=\"aborted\"}", 1},
                {"cclod_op_errors_total{reason=\"deadline_exceeded\"}", 1}};
    }
    EXPECT_EQ(Named(got, "cclod_ops_total"), ops);
    EXPECT_EQ(Named(got, "cclod_op_bytes_total"), bytes);
    EXPECT_EQ(Named(got, "cclod_op_errors_total"), errors);
    const Samples refused =
        rank == 0 ? Samples{{"cclod_submits_refused_total{reason=\"unavailable\"}", 2}} : Samples{};
    EXPECT_EQ(Named(got, "cclod_submits_refused_total"), refused);
    EXPECT_EQ(
        Named(got, "cclod_op_duration_seconds_count"),
        (Samples{{"cclod_op_duration_seconds_count{collective=\"bcast\",size=\"4KiB\"}", 1},
                 {"cclod_op_duration_seconds_count{collective=\"allreduce\",size=\"4KiB\"}", 3},
                 {"cclod_op_duration_seconds_count{collective=\"allreduce\",size=\"1MiB\"}", 2}}));
    // Every op that reached the engine waited in the queue first; the dependent did not.
    EXPECT_EQ(
        Named(got, "cclod_op_queue_wait_seconds_count"),
        (Samples{{"cclod_op_queue_wait_seconds_count{tenant=\"default\"}", rank == 0 ? 7 : 6}}));
    EXPECT_EQ(Named(got, "cclod_ops_in_flight"), (Samples{{"cclod_ops_in_flight", 0}}));
    // One tenant: full turns.
    EXPECT_EQ(Named(got, "cclod_engine_turn_bytes"),
              (Samples{{"cclod_engine_turn_bytes", 1048576}}));
    // The deadline broke the communicator at rank 0, which removed it and said goodbye to
    // rank 1's daemon.
    EXPECT_EQ(Named(got, "cclod_peer_sessions"),
              rank == 0 ? PeerSessions(0, 0, 0, 0) : PeerSessions(0, 0, 1, 0));

    StatsRows rows;
    rows[{"allreduce", "ring", "eager"}] = {3, 0, 3 * 4096};
    rows[{"allreduce", "recursive_doubling", "eager"}] = {2, 0, 2 * 262144};
    rows[{"bcast", "one_to_all", "eager"}] = {1, 0, 400};
    if (rank == 0) {
      rows[{"recv", "direct", "eager"}] = {0, 1, 0};
      rows[{"allreduce", "none", "eager"}] = {0, 1, 0};
    }
    const v1::StatsResponse stats = StatsJson(daemons[rank]);
    EXPECT_EQ(Rows(stats), rows);
    std::map<std::string, uint64_t> reasons;
    for (const v1::ErrorCount& error : stats.errors()) reasons[error.reason()] = error.ops();
    EXPECT_EQ(reasons,
              (rank == 0 ? std::map<std::string, uint64_t>{{"aborted", 1}, {"deadline_exceeded", 1}}
                         : std::map<std::string, uint64_t>{}));
    std::map<std::string, uint64_t> refusals;
    for (const v1::ErrorCount& refused : stats.refused())
      refusals[refused.reason()] = refused.ops();
    EXPECT_EQ(refusals, (rank == 0 ? std::map<std::string, uint64_t>{{"unavailable", 2}}
                                   : std::map<std::string, uint64_t>{}));
    const ProcessResult table = Ccloctl(daemons[rank], {"stats"});
    EXPECT_EQ(table.exit_code, 0) << table.output;
    EXPECT_TRUE(absl::StartsWith(table.output, "tenant   collective  algorithm")) << table.output;

    const std::string exposition = Scrape(daemons[rank]);
    const ProcessResult check = PromtoolCheck(exposition, "exposition" + std::to_string(rank));
    EXPECT_EQ(check.exit_code, 0) << check.output;
    EXPECT_TRUE(absl::StrContains(exposition, "le=\"0.0005\"")) << exposition;
    EXPECT_EQ(NoisyBounds(exposition), std::set<std::string>{});

    // Rank 0's exposition has a series of every family; docs/operations.md lists each one
    // with its type and labels, and nothing it does not export.
    if (rank != 0) continue;
    absl::StatusOr<std::string> operations =
        hw::ReadTextFile("operations.md", Runfile("docs/operations.md"));
    ASSERT_TRUE(operations.ok()) << operations.status();
    const std::map<std::string, Family> documented = DocumentedFamilies(*operations);
    const std::map<std::string, Family> exported = ExportedFamilies(exposition);
    for (const auto& [name, family] : exported) {
      const auto row = documented.find(name);
      if (row == documented.end()) {
        ADD_FAILURE() << name << " is exported but not in operations.md's metrics table";
        continue;
      }
      EXPECT_EQ(row->second.type, family.type) << name;
      EXPECT_EQ(row->second.labels, family.labels) << name;
    }
    for (const auto& [name, family] : documented) {
      EXPECT_TRUE(exported.count(name)) << name << " is in operations.md but not exported";
    }
  }
}

TEST(MetricsTest, ScratchKeptForTheCallsAfterShows) {
  // An in-place recursive doubling allreduce of 2 MiB receives the other rank's whole
  // buffer into 2 MiB of scratch, which the engine keeps once the call is done: memory the
  // daemon holds beside the rx pool.
  constexpr uint64_t kBytes = 2 << 20;
  Daemon daemons[2];
  Pair pair;
  JoinAndRun(daemons, pair, [&](int rank) {
    absl::StatusOr<Buffer> buffer = pair.clients[rank]->AllocBuffer(kBytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(pair.comms[rank]
                    ->Allreduce(*buffer, *buffer, kBytes / sizeof(int32_t), DataType::kInt32,
                                ReduceOp::kSum, {.algorithm = "recursive_doubling"})
                    .ok());
  });
  if (HasFatalFailure()) return;
  for (Daemon& daemon : daemons) {
    // The engine takes the scratch back just after the call's completion.
    EXPECT_TRUE(
        WaitUntil([&] { return Parse(Scrape(daemon))["cclod_scratch_kept_bytes"] == kBytes; },
                  absl::Seconds(10)))
        << Scrape(daemon);
    EXPECT_EQ(AdminJson<v1::StatusResponse>(daemon, {"status"}).scratch_bytes_kept(), kBytes);
  }
}

// A peer's data session is up once the communicator is, left once the peer's rank left,
// and no longer counted once the communicator is gone.
TEST(MetricsTest, PeerSessionsByState) {
  Daemon daemons[2];
  Pair pair;
  JoinAndRun(daemons, pair, [](int) {});
  if (HasFatalFailure()) return;
  for (Daemon& daemon : daemons) {
    EXPECT_EQ(Named(Parse(Scrape(daemon)), "cclod_peer_sessions"), PeerSessions(0, 1, 0, 0));
  }
  ASSERT_TRUE(pair.comms[1]->Destroy().ok());
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Named(Parse(Scrape(daemons[0])), "cclod_peer_sessions") == PeerSessions(0, 0, 1, 0);
      },
      absl::Seconds(30)))
      << Scrape(daemons[0]);
  EXPECT_EQ(Named(Parse(Scrape(daemons[1])), "cclod_peer_sessions"), PeerSessions(0, 0, 0, 0));
  ASSERT_TRUE(pair.comms[0]->Destroy().ok());
  // The engine forgets the communicator's sessions on its own thread, soon after.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Named(Parse(Scrape(daemons[0])), "cclod_peer_sessions") == PeerSessions(0, 0, 0, 0);
      },
      absl::Seconds(30)))
      << Scrape(daemons[0]);

  // A peer daemon that dies says no goodbye: its sessions are lost. The idle communicator's
  // stays on the gauge; the one whose pending receive fails breaks, and its session leaves
  // the gauge but is counted among the lost.
  auto lost_total = [](int lost) { return Samples{{"cclod_peer_sessions_lost_total", lost}}; };
  EXPECT_EQ(Named(Parse(Scrape(daemons[0])), "cclod_peer_sessions_lost_total"), lost_total(0));
  Pair idle, busy;
  JoinAndRun(daemons, idle, [](int) {});
  JoinAndRun(daemons, busy, [](int) {});
  if (HasFatalFailure()) return;
  absl::StatusOr<Buffer> buffer = busy.clients[0]->AllocBuffer(64);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  absl::StatusOr<Request> receive =
      busy.comms[0]->RecvAsync(*buffer, 0, 16, DataType::kFloat32, 1, 0);
  ASSERT_TRUE(receive.ok()) << receive.status();
  daemons[1].process().Signal(SIGKILL);
  EXPECT_EQ(receive->Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(WaitUntil(
      [&] {
        const Samples got = Parse(Scrape(daemons[0]));
        return Named(got, "cclod_peer_sessions") == PeerSessions(0, 0, 0, 1) &&
               Named(got, "cclod_peer_sessions_lost_total") == lost_total(2);
      },
      absl::Seconds(30)))
      << Scrape(daemons[0]);
}

TEST(MetricsTest, ConnectionsThatSendNothingDoNotHoldOffAScrape) {
  Daemon daemon;
  const std::string address = daemon.metrics_address();
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port =
      htons(static_cast<uint16_t>(std::atoi(address.c_str() + address.rfind(':') + 1)));
  ASSERT_EQ(inet_pton(AF_INET, address.substr(0, address.rfind(':')).c_str(), &target.sin_addr), 1);
  // As many idle connections as the server has workers, and more.
  std::vector<int> idle;
  for (int i = 0; i < 6; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)), 0);
    idle.push_back(fd);
  }
  // Scrape gives up after 10 s: the idle ones must have been closed well before.
  EXPECT_NE(Scrape(daemon).find("\ncclod_uptime_seconds "), std::string::npos);
  for (int fd : idle) close(fd);
}

// So that an operator rolling an upgrade can tell which daemons can work together.
TEST(MetricsTest, BuildInfoNamesTheProtocolVersions) {
  Daemon daemon;
  const Samples info = Named(Parse(Scrape(daemon)), "cclod_build_info");
  ASSERT_EQ(info.size(), 1u);
  const std::string& series = info.begin()->first;
  for (const std::string& label :
       {absl::StrCat("data_wire_version=\"", hw::poe::kWireVersion, "\""),
        absl::StrCat("selection_version=\"", firmware::kSelectionVersion, "\""),
        absl::StrCat("attach_version=\"", attach::kVersion, "\""),
        absl::StrCat("ring_version=\"", ring::kVersion, "\"")}) {
    EXPECT_TRUE(absl::StrContains(series, label)) << series << " lacks " << label;
  }
  EXPECT_EQ(info.begin()->second, 1);
}

// Prometheus's standard process metrics are cclod's own: what the kernel says of its
// process, and the descriptor limit it raised itself to.
TEST(MetricsTest, ProcessMetricsAreTheDaemonsOwn) {
  Daemon daemon("", {"/usr/bin/prlimit", "--nofile=500:4096"});
  const pid_t pid = daemon.process().pid();
  absl::StatusOr<hw::ProcessStat> before = hw::ReadProcessStat(pid);
  const Samples got = Parse(Scrape(daemon));
  absl::StatusOr<hw::ProcessStat> after = hw::ReadProcessStat(pid);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(got.at("process_max_fds"), 4096);
  EXPECT_GT(got.at("process_open_fds"), 0);
  EXPECT_LT(got.at("process_open_fds"), 500);
  EXPECT_GE(got.at("process_cpu_seconds_total"), before->cpu_seconds);
  EXPECT_LE(got.at("process_cpu_seconds_total"), after->cpu_seconds);
  absl::StatusOr<double> started = hw::StartTimeSeconds(after->start_ticks);
  ASSERT_TRUE(started.ok()) << started.status();
  // Each process reads the boot time once, and some kernels' answers differ by a second.
  EXPECT_NEAR(got.at("process_start_time_seconds"), *started, 1.0);
  // gRPC may start or end a thread of its own meanwhile.
  EXPECT_NEAR(got.at("process_threads"), static_cast<double>(after->threads), 3);
  EXPECT_GT(got.at("process_threads"), 2);
  EXPECT_GT(got.at("process_resident_memory_bytes"), 0);
  EXPECT_GE(got.at("process_virtual_memory_bytes"), got.at("process_resident_memory_bytes"));
}

/// The sum of the samples of `name` whose series holds `labels`.
double Sum(const Samples& samples, const std::string& name, const std::string& labels) {
  double sum = 0;
  for (const auto& [series, value] : Named(samples, name)) {
    if (absl::StrContains(series, labels)) sum += value;
  }
  return sum;
}

// civetweb's workers collect side by side (more scrapers than its 4 workers) while clients
// attach, join, run a barrier and detach: every scrape is whole, each scraper sees the
// counters only grow, and at the end the metrics count every barrier and no session left.
// Under --config=tsan it checks the collection against the daemon's own threads.
TEST(MetricsTest, ConcurrentScrapesWhileSessionsComeAndGo) {
  Daemon daemon;
  constexpr int kScrapers = 6, kClients = 2, kRounds = 10;
  const std::vector<std::string> kWhole = {"cclod_uptime_seconds", "cclod_sessions",
                                           "cclod_ops_in_flight",  "process_cpu_seconds_total",
                                           "process_threads",      "process_start_time_seconds",
                                           "process_open_fds",     "process_max_fds"};
  std::atomic<bool> clients_done = false;
  std::atomic<int> rounds_done = 0;
  std::vector<std::string> problems[kScrapers];
  int scrapes[kScrapers] = {};
  auto scrape = [&](int scraper) {
    Samples last;
    // At least 3 scrapes each, and on while the clients come and go.
    while (scrapes[scraper] < 3 || !clients_done) {
      const std::string exposition = Scrape(daemon);
      ++scrapes[scraper];
      const Samples got = Parse(exposition);
      for (const std::string& name : kWhole) {
        if (!got.contains(name)) problems[scraper].push_back("no " + name + " in:\n" + exposition);
      }
      if (got.contains("cclod_sessions") &&
          (got.at("cclod_sessions") < 0 || got.at("cclod_sessions") > kClients)) {
        problems[scraper].push_back(absl::StrCat("cclod_sessions ", got.at("cclod_sessions")));
      }
      for (const char* counter : {"cclod_ops_completed_total", "process_cpu_seconds_total"}) {
        if (last.contains(counter) && got.contains(counter) && got.at(counter) < last.at(counter)) {
          problems[scraper].push_back(
              absl::StrCat(counter, " went from ", last.at(counter), " down to ", got.at(counter)));
        }
      }
      last = got;
    }
  };
  auto attach_and_detach = [&] {
    for (int round = 0; round < kRounds; ++round) {
      std::unique_ptr<Client> client;
      std::unique_ptr<Communicator> comm;
      ASSERT_NO_FATAL_FAILURE(AttachAlone(daemon, &client, &comm));
      ASSERT_TRUE(comm->Barrier().ok());
      ++rounds_done;
    }
  };
  std::vector<std::thread> threads;
  for (int scraper = 0; scraper < kScrapers; ++scraper) threads.emplace_back(scrape, scraper);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) clients.emplace_back(attach_and_detach);
  for (std::thread& thread : clients) thread.join();
  clients_done = true;
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(rounds_done, kClients * kRounds);
  for (int scraper = 0; scraper < kScrapers; ++scraper) {
    EXPECT_GE(scrapes[scraper], 3);
    EXPECT_TRUE(problems[scraper].empty())
        << "scraper " << scraper << ": " << problems[scraper].size() << " problems, the first "
        << problems[scraper].front();
  }
  // A session ends once the daemon sees its attach connection close.
  std::string exposition;
  EXPECT_TRUE(WaitUntil(
      [&] {
        exposition = Scrape(daemon);
        const Samples got = Parse(exposition);
        return got.contains("cclod_sessions") && got.at("cclod_sessions") == 0 &&
               got.contains("cclod_communicators") && got.at("cclod_communicators") == 0;
      },
      absl::Seconds(30)))
      << exposition;
  const Samples got = Parse(exposition);
  EXPECT_EQ(Sum(got, "cclod_ops_total", "collective=\"barrier\""), kClients * kRounds)
      << exposition;
  EXPECT_EQ(Sum(got, "cclod_ops_total", "result=\"error\""), 0) << exposition;
}

TEST(MetricsTest, OnlyTheMetricsPathServesTheExposition) {
  Daemon daemon;
  EXPECT_NE(Scrape(daemon).find("\ncclod_uptime_seconds "), std::string::npos);
  for (const char* path : {"/metricsx", "/metrics/", "/metrics/a", "/", "/metric"}) {
    EXPECT_EQ(HttpGet(daemon.metrics_address(), path).find("cclod_uptime_seconds"),
              std::string::npos)
        << path;
  }
}

}  // namespace
}  // namespace cclo::testing
