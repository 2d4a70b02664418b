// ccloctl: formatting of hand-made responses, and the commands against a real cclod.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cclo/client.h"
#include "client/ccloctl/commands.h"
#include "client/ccloctl/format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo::ccloctl {
namespace {

using ::testing::MatchesRegex;

v1::StatusResponse SampleStatus() {
  v1::StatusResponse status;
  status.set_version("0.1.0");
  status.set_peer_address("10.0.0.1:7000");
  status.set_uptime_seconds(3600);
  status.set_sessions(2);
  status.set_ops_completed(12345678901234);
  return status;
}

v1::ListCommunicatorsResponse SampleCommunicators() {
  v1::ListCommunicatorsResponse list;
  v1::CommunicatorInfo* ready = list.add_communicators();
  ready->set_comm_id("00112233445566778899aabbccddeeff");
  ready->set_tenant("training");
  ready->set_size(4);
  ready->add_local_ranks(0);
  ready->add_local_ranks(2);
  ready->set_state("ready");
  ready->set_ops_completed(17);
  v1::CommunicatorInfo* broken = list.add_communicators();
  broken->set_comm_id("ffeeddccbbaa99887766554433221100");
  broken->set_size(2);
  broken->set_state("broken");
  broken->set_error("peer 10.0.0.2:7000 lost");
  return list;
}

v1::ShowCommunicatorResponse SampleCommunicator() {
  v1::ShowCommunicatorResponse show;
  show.set_comm_id("00112233445566778899aabbccddeeff");
  show.set_tenant("training");
  show.set_size(3);
  show.set_state("broken");
  show.set_error("rank 2 left: its client (pid 42) exited");
  show.set_created_unix_ms(1714557600123);
  show.set_ops_completed(17);
  show.set_ops_failed(1);
  show.set_bytes_sent(4096);
  show.mutable_policy()->mutable_policy()->set_version(3);
  show.mutable_policy()->mutable_policy()->add_rules();
  show.mutable_policy()->set_root_address("10.0.0.2:7000");
  show.mutable_policy()->set_transport("tcp");
  for (uint32_t rank : {0, 1, 2}) {
    v1::MemberInfo* member = show.add_members();
    member->set_rank(rank);
    const std::string host = rank == 1 ? "10.0.0.2" : "10.0.0.1";
    member->set_daemon_address(host + ":7000");
    member->set_data_address(host + ":7001");
  }
  show.mutable_members(0)->set_local(true);
  show.mutable_members(0)->set_session_id(3);
  show.mutable_members(0)->set_client_pid(41);
  v1::DepartedRank* departed = show.add_departed();
  departed->set_rank(2);
  departed->set_reason("rank 2 left: its client (pid 42) exited");
  return show;
}

// Runs ccloctl with `args`; returns the exit code and fills `out` and `err`.
int Ccloctl(std::vector<std::string> args, std::string& out, std::string& err) {
  args.insert(args.begin(), "ccloctl");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out_stream, err_stream;
  const int code = Main(static_cast<int>(argv.size()), argv.data(), out_stream, err_stream);
  out = out_stream.str();
  err = err_stream.str();
  return code;
}

TEST(FormatTest, StatusTableListsEveryFieldInOrder) {
  const std::string table = StatusTable(SampleStatus());
  EXPECT_EQ(table.substr(0, table.find('\n', table.find('\n') + 1) + 1),
            "key                   value\n"
            "version               0.1.0\n");
  EXPECT_NE(table.find("\nuptime_seconds        3600\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\ndata_address          -\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\nops_completed         12345678901234\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\nwire_errors           0\n"), std::string::npos) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'),
            1 + v1::StatusResponse::descriptor()->field_count());
}

TEST(FormatTest, CommunicatorsTable) {
  EXPECT_EQ(CommunicatorsTable(SampleCommunicators()),
            "id                                tenant    size  local_ranks  state   ops  error\n"
            "00112233445566778899aabbccddeeff  training  4     0,2          ready   17   -\n"
            "ffeeddccbbaa99887766554433221100  -         2     -            broken  0    "
            "peer 10.0.0.2:7000 lost\n");
}

TEST(FormatTest, CommunicatorTable) {
  EXPECT_EQ(CommunicatorTable(SampleCommunicator()),
            "key            value\n"
            "id             00112233445566778899aabbccddeeff\n"
            "tenant         training\n"
            "size           3\n"
            "state          broken\n"
            "error          rank 2 left: its client (pid 42) exited\n"
            "created        2024-05-01T10:00:00.123Z\n"
            "ops_completed  17\n"
            "ops_failed     1\n"
            "ops_in_flight  0\n"
            "bytes_sent     4096\n"
            "label          -\n"
            "transport      tcp\n"
            "policy         version 3 of root 10.0.0.2:7000, 1 rules\n"
            "\n"
            "rank  daemon_address  data_address   local  session  client_pid\n"
            "0     10.0.0.1:7000   10.0.0.1:7001  yes    3        41\n"
            "1     10.0.0.2:7000   10.0.0.2:7001  no     -        -\n"
            "2     10.0.0.1:7000   10.0.0.1:7001  no     -        -\n"
            "\n"
            "departed_rank  reason\n"
            "2              rank 2 left: its client (pid 42) exited\n");
  // Without departures the table ends after the members.
  v1::ShowCommunicatorResponse ready = SampleCommunicator();
  ready.clear_departed();
  const std::string table = CommunicatorTable(ready);
  EXPECT_TRUE(absl::EndsWith(table, "\n2     10.0.0.1:7000   10.0.0.1:7001  no     -        -\n"))
      << table;
}

TEST(FormatTest, StatsTable) {
  v1::StatsResponse stats;
  v1::OpStats& ring = *stats.add_ops();
  ring.set_tenant("training");
  ring.set_collective("allreduce");
  ring.set_algorithm("ring");
  ring.set_protocol("eager");
  ring.set_ops_ok(3);
  ring.set_ops_failed(1);
  ring.set_bytes(12288);
  // As Histogram::Quantile interpolates it: the first of three ops in the 5 to 10 ms bucket.
  ring.set_latency_p50_seconds(0.005 + 0.005 / 3);
  ring.set_latency_p99_seconds(0.25);
  v1::OpStats& none = *stats.add_ops();
  none.set_tenant("training");
  none.set_collective("bcast");
  none.set_algorithm("none");
  none.set_protocol("rendezvous");
  none.set_ops_failed(2);
  EXPECT_EQ(StatsTable(stats),
            "tenant    collective  algorithm  protocol    ok  failed  bytes  p50     p99\n"
            "training  allreduce   ring       eager       3   1       12288  6.67ms  250ms\n"
            "training  bcast       none       rendezvous  0   2       0      -       -\n");
  v1::ErrorCount& error = *stats.add_errors();
  error.set_reason("deadline_exceeded");
  error.set_ops(3);
  EXPECT_TRUE(absl::EndsWith(StatsTable(stats),
                             "-       -\n\nerror              ops\ndeadline_exceeded  3\n"))
      << StatsTable(stats);
}

TEST(FormatTest, JsonIsOneLineWithEveryFieldAndParsesBack) {
  absl::StatusOr<std::string> json = ToJson(SampleStatus());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->find('\n'), json->size() - 1);
  EXPECT_NE(json->find("\"version\":\"0.1.0\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"ops_completed\":\"12345678901234\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"wire_errors\":\"0\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"data_address\":\"\""), std::string::npos) << *json;
  v1::StatusResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, SampleStatus()));
}

// The key -> value lines of a StatusTable.
std::map<std::string, std::string> TableValues(const std::string& table) {
  std::map<std::string, std::string> values;
  for (absl::string_view line : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cells.size() == 2) values[cells[0]] = cells[1];
  }
  return values;
}

TEST(CommandsTest, StatusAndCommsAgainstADaemon) {
  testing::Daemon daemon("rx_pool_bytes: 1048576\n");
  // One session with a buffer and a one-rank communicator that ran one op and failed one, and
  // a two-rank communicator broken when its rank 1 exited.
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon.runtime_dir());
  absl::StatusOr<std::unique_ptr<Client>> departing = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(client.ok() && departing.ok()) << client.status() << departing.status();
  absl::StatusOr<Buffer> buffer = (*client)->AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  absl::StatusOr<std::string> solo_token = (*client)->CreateCommunicatorId();
  absl::StatusOr<std::string> pair_token = (*client)->CreateCommunicatorId();
  ASSERT_TRUE(solo_token.ok() && pair_token.ok());
  absl::StatusOr<std::unique_ptr<Communicator>> solo = (*client)->Join(*solo_token, 0, 1);
  ASSERT_TRUE(solo.ok()) << solo.status();
  ASSERT_TRUE((*solo)->Allreduce(*buffer, *buffer, 8, DataType::kInt32, ReduceOp::kSum).ok());
  EXPECT_EQ((*solo)->Bcast(*buffer, 0, 8, DataType::kInt32, 0, {.algorithm = "none"}).code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<Communicator>> pair;
  std::thread rank1([&] { EXPECT_TRUE((*departing)->Join(*pair_token, 1, 2).ok()); });
  pair = (*client)->Join(*pair_token, 0, 2);
  rank1.join();
  ASSERT_TRUE(pair.ok()) << pair.status();
  departing->reset();
  const std::string broken = absl::StrCat("rank 1 left: its client (pid ", getpid(), ") exited");
  ASSERT_TRUE(daemon.process().WaitForOutput(
      absl::StrCat("communicator ", (*pair)->id_hex(), " broken: ", broken), absl::Seconds(10)));

  std::string out, err;
  ASSERT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "status", "--json"}, out, err), 0)
      << err;
  v1::StatusResponse status;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out, &status).ok()) << out;
  EXPECT_FALSE(status.version().empty());
  EXPECT_EQ(status.peer_address(), pair_token->substr(pair_token->rfind('-') + 1));
  EXPECT_THAT(status.data_address(), MatchesRegex("127\\.0\\.0\\.1:[0-9]+"));
  EXPECT_EQ(status.sessions(), 1u);
  EXPECT_EQ(status.communicators(), 2u);
  EXPECT_EQ(status.buffers(), 1u);
  EXPECT_EQ(status.buffer_bytes(), 4096u);
  EXPECT_EQ(status.ops_completed(), 1u);
  EXPECT_EQ(status.ops_failed(), 1u);
  EXPECT_EQ(status.rx_pool_bytes_total(), 1048576u);
  EXPECT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "status"}, out, err), 0) << err;
  // Only the uptime may have moved on between the two calls.
  status.set_uptime_seconds(std::stoull(TableValues(out)["uptime_seconds"]));
  EXPECT_EQ(out, StatusTable(status));

  EXPECT_EQ(Ccloctl({"comms", "--runtime-dir", daemon.runtime_dir(), "--json"}, out, err), 0)
      << err;
  v1::ListCommunicatorsResponse comms;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out, &comms).ok()) << out;
  ASSERT_EQ(comms.communicators_size(), 2) << out;
  for (const v1::CommunicatorInfo& comm : comms.communicators()) {
    EXPECT_EQ(comm.tenant(), "default");
    EXPECT_EQ(comm.local_ranks_size(), 1);
    EXPECT_EQ(comm.local_ranks(0), 0u);
    ASSERT_GE(comm.ranks_size(), 1);
    EXPECT_EQ(comm.ranks(0).daemon_address(), status.peer_address());
    EXPECT_EQ(comm.ranks(0).data_address(), status.data_address());
    if (comm.comm_id() == (*solo)->id_hex()) {
      EXPECT_EQ(comm.size(), 1u);
      EXPECT_EQ(comm.state(), "ready");
      EXPECT_EQ(comm.ops_completed(), 1u);
      EXPECT_EQ(comm.error(), "");
    } else {
      EXPECT_EQ(comm.comm_id(), (*pair)->id_hex());
      EXPECT_EQ(comm.size(), 2u);
      EXPECT_EQ(comm.state(), "broken");
      EXPECT_EQ(comm.ops_completed(), 0u);
      EXPECT_EQ(comm.error(), broken);
    }
  }
  EXPECT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "comms"}, out, err), 0) << err;
  EXPECT_EQ(out, CommunicatorsTable(comms));
  EXPECT_EQ(err, "");
}

// The daemon's own status, through `ccloctl status --json`.
v1::StatusResponse DaemonStatus(const testing::Daemon& daemon) {
  std::string out, err;
  EXPECT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "status", "--json"}, out, err), 0)
      << err;
  v1::StatusResponse status;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(out, &status).ok()) << out;
  return status;
}

// `ccloctl comms show id --json` parsed, after checking that the table says the same.
v1::ShowCommunicatorResponse ShowCommunicator(const testing::Daemon& daemon,
                                              const std::string& id) {
  std::string out, err;
  EXPECT_EQ(
      Ccloctl({"--runtime-dir", daemon.runtime_dir(), "comms", "show", id, "--json"}, out, err), 0)
      << err;
  v1::ShowCommunicatorResponse show;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(out, &show).ok()) << out;
  EXPECT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "comms", "show", id}, out, err), 0)
      << err;
  EXPECT_EQ(out, CommunicatorTable(show));
  return show;
}

TEST(CommandsTest, CommsShowMembersSessionsOpsAndDepartures) {
  // Ranks 0 and 2 on daemon a (two sessions), rank 1 on daemon b.
  testing::Daemon a, b;
  absl::StatusOr<std::unique_ptr<Client>> client0 = Client::Attach(a.runtime_dir());
  absl::StatusOr<std::unique_ptr<Client>> client1 = Client::Attach(b.runtime_dir());
  absl::StatusOr<std::unique_ptr<Client>> client2 = Client::Attach(a.runtime_dir());
  ASSERT_TRUE(client0.ok() && client1.ok() && client2.ok());
  std::vector<Client*> clients = {client0->get(), client1->get(), client2->get()};
  absl::StatusOr<std::string> token = clients[0]->CreateCommunicatorId();
  ASSERT_TRUE(token.ok()) << token.status();
  const absl::Time before_join = absl::Now();
  std::vector<std::unique_ptr<Communicator>> comms(3);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < 3; ++rank) {
    ranks.emplace_back([&, rank] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = clients[rank]->Join(*token, rank, 3);
      ASSERT_TRUE(comm.ok()) << comm.status();
      comms[rank] = *std::move(comm);
      absl::StatusOr<Buffer> buffer = clients[rank]->AllocBuffer(4096);
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      EXPECT_TRUE(
          comms[rank]->Allreduce(*buffer, *buffer, 8, DataType::kInt32, ReduceOp::kSum).ok());
    });
  }
  for (std::thread& rank : ranks) rank.join();
  ASSERT_TRUE(comms[0] && comms[1] && comms[2]);
  // An op the engine refuses counts as failed without breaking the communicator.
  absl::StatusOr<Buffer> scratch = clients[0]->AllocBuffer(4096);
  ASSERT_TRUE(scratch.ok()) << scratch.status();
  EXPECT_EQ(comms[0]->Bcast(*scratch, 0, 8, DataType::kInt32, 0, {.algorithm = "none"}).code(),
            absl::StatusCode::kInvalidArgument);

  const v1::StatusResponse status_a = DaemonStatus(a), status_b = DaemonStatus(b);
  const std::string& id = comms[0]->id_hex();
  v1::ShowCommunicatorResponse show = ShowCommunicator(a, id);
  EXPECT_EQ(show.comm_id(), id);
  EXPECT_EQ(show.size(), 3u);
  EXPECT_EQ(show.state(), "ready");
  EXPECT_EQ(show.error(), "");
  EXPECT_EQ(show.ops_completed(), 2u);
  EXPECT_EQ(show.ops_failed(), 1u);
  EXPECT_EQ(show.ops_in_flight(), 0u);
  EXPECT_GE(show.created_unix_ms(), absl::ToUnixMillis(before_join - absl::Seconds(1)));
  EXPECT_LE(show.created_unix_ms(), absl::ToUnixMillis(absl::Now()));
  EXPECT_EQ(show.departed_size(), 0);
  ASSERT_EQ(show.members_size(), 3) << show.DebugString();
  for (uint32_t rank = 0; rank < 3; ++rank) {
    const v1::MemberInfo& member = show.members(rank);
    const v1::StatusResponse& host = rank == 1 ? status_b : status_a;
    EXPECT_EQ(member.rank(), rank);
    EXPECT_EQ(member.daemon_address(), host.peer_address());
    EXPECT_EQ(member.data_address(), host.data_address());
    EXPECT_EQ(member.local(), rank != 1);
    EXPECT_EQ(member.session_id(), rank == 1 ? 0 : clients[rank]->session_id());
    EXPECT_EQ(member.client_pid(), rank == 1 ? 0u : static_cast<uint32_t>(getpid()));
  }
  const v1::ShowCommunicatorResponse on_b = ShowCommunicator(b, id);
  EXPECT_EQ(on_b.ops_completed(), 1u);
  EXPECT_EQ(on_b.ops_failed(), 0u);
  ASSERT_EQ(on_b.members_size(), 3);
  EXPECT_TRUE(on_b.members(1).local());
  EXPECT_EQ(on_b.members(1).session_id(), clients[1]->session_id());
  EXPECT_FALSE(on_b.members(0).local());

  // Rank 2's client exits: a still hosts rank 0, so the communicator is broken there and
  // rank 2 is listed as departed. An upper-case prefix names it too.
  comms[2].reset();
  client2->reset();
  const std::string reason = absl::StrCat("rank 2 left: its client (pid ", getpid(), ") exited");
  ASSERT_TRUE(a.process().WaitForOutput(absl::StrCat("communicator ", id, " broken: ", reason),
                                        absl::Seconds(10)));
  show = ShowCommunicator(a, absl::AsciiStrToUpper(id.substr(0, 12)));
  EXPECT_EQ(show.comm_id(), id);
  EXPECT_EQ(show.state(), "broken");
  EXPECT_EQ(show.error(), reason);
  ASSERT_EQ(show.departed_size(), 1);
  EXPECT_EQ(show.departed(0).rank(), 2u);
  EXPECT_EQ(show.departed(0).reason(), reason);
  ASSERT_EQ(show.members_size(), 3);
  EXPECT_TRUE(show.members(0).local());
  EXPECT_FALSE(show.members(2).local());
  EXPECT_EQ(show.members(2).session_id(), 0u);
}

TEST(CommandsTest, CommsShowRefusesUnknownAmbiguousAndBadIds) {
  testing::Daemon daemon;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  // Seventeen communicators: two of them share their first hex digit.
  std::vector<std::unique_ptr<Communicator>> comms;
  std::map<char, int> first_digits;
  std::set<std::string> two_digits;
  for (int i = 0; i < 17; ++i) {
    absl::StatusOr<std::string> token = (*client)->CreateCommunicatorId();
    ASSERT_TRUE(token.ok()) << token.status();
    absl::StatusOr<std::unique_ptr<Communicator>> comm = (*client)->Join(*token, 0, 1);
    ASSERT_TRUE(comm.ok()) << comm.status();
    ++first_digits[(*comm)->id_hex()[0]];
    two_digits.insert((*comm)->id_hex().substr(0, 2));
    comms.push_back(*std::move(comm));
  }
  const char shared = std::find_if(first_digits.begin(), first_digits.end(), [](const auto& digit) {
                        return digit.second > 1;
                      })->first;
  std::string unused;
  for (int prefix = 0; unused.empty() || two_digits.count(unused); ++prefix) {
    unused = absl::StrFormat("%02x", prefix);
  }

  std::string out, err;
  const std::string dir = daemon.runtime_dir();
  EXPECT_EQ(Ccloctl({"--runtime-dir", dir, "comms", "show", std::string(1, shared)}, out, err), 1);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find(absl::StrCat("ccloctl: ShowCommunicator at unix:", dir,
                                  "/admin.sock: communicator id prefix '", std::string(1, shared),
                                  "' matches ")),
            std::string::npos)
      << err;
  EXPECT_EQ(Ccloctl({"--runtime-dir", dir, "comms", "show", unused, "--json"}, out, err), 1);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find(absl::StrCat("no communicator ", unused, " on this daemon")),
            std::string::npos)
      << err;
  EXPECT_EQ(Ccloctl({"--runtime-dir", dir, "comms", "show", "0x12"}, out, err), 1);
  EXPECT_NE(err.find("communicator id '0x12' is not a hex id or prefix"), std::string::npos) << err;
  EXPECT_EQ(Ccloctl({"--runtime-dir", dir, "comms", "show"}, out, err), 2);
  EXPECT_NE(err.find("id"), std::string::npos) << err;
  // The full id of every one of them answers.
  for (const std::unique_ptr<Communicator>& comm : comms) {
    EXPECT_EQ(ShowCommunicator(daemon, comm->id_hex()).comm_id(), comm->id_hex());
  }
}

TEST(CommandsTest, BuffersAndLogLevel) {
  testing::Daemon daemon;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Buffer> small = (*client)->AllocBuffer(4096);
  absl::StatusOr<Buffer> large = (*client)->AllocBuffer(8192);
  ASSERT_TRUE(small.ok() && large.ok());
  std::string out, err;
  ASSERT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "buffers", "--json"}, out, err), 0)
      << err;
  v1::ListBuffersResponse buffers;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out, &buffers).ok()) << out;
  ASSERT_EQ(buffers.buffers_size(), 2) << out;
  EXPECT_EQ(buffers.buffers(0).buffer_id(), small->id());
  EXPECT_EQ(buffers.buffers(0).bytes(), 4096u);
  EXPECT_EQ(buffers.buffers(1).buffer_id(), large->id());
  EXPECT_EQ(buffers.buffers(1).bytes(), 8192u);
  for (const v1::BufferInfo& buffer : buffers.buffers()) {
    EXPECT_EQ(buffer.session_id(), (*client)->session_id());
    EXPECT_EQ(buffer.tenant(), "default");
  }
  ASSERT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "buffers"}, out, err), 0) << err;
  EXPECT_EQ(out, BuffersTable(buffers));

  // A level that silences warnings still logs its own change.
  ASSERT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "log-level", "error"}, out, err), 0)
      << err;
  EXPECT_EQ(TableValues(out)["previous_level"], "debug") << out;
  EXPECT_TRUE(daemon.process().WaitForOutput("log level set to error through the admin socket",
                                             absl::Seconds(10)));
  EXPECT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "log-level", "loud"}, out, err), 1);
  EXPECT_NE(err.find("log level 'loud' is not one of trace, debug, info, warn, error, critical, "
                     "off"),
            std::string::npos)
      << err;
  ASSERT_EQ(
      Ccloctl({"--runtime-dir", daemon.runtime_dir(), "log-level", "info", "--json"}, out, err), 0)
      << err;
  EXPECT_EQ(out, "{\"previous\":\"error\"}\n");
}

TEST(CommandsTest, UnreachableDaemonExitsOneWithTheReason) {
  std::string out, err;
  EXPECT_EQ(Ccloctl({"--runtime-dir", "/tmp/no-such-cclod-dir", "status"}, out, err), 1);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("ccloctl: cannot reach cclod at unix:/tmp/no-such-cclod-dir/admin.sock"),
            std::string::npos)
      << err;
}

TEST(CommandsTest, HelpAndUsageErrors) {
  std::string out, err;
  EXPECT_EQ(Ccloctl({"--help"}, out, err), 0);
  EXPECT_NE(out.find("--runtime-dir"), std::string::npos) << out;
  EXPECT_EQ(Ccloctl({"comms", "--help"}, out, err), 0);
  EXPECT_NE(out.find("Usage: ccloctl comms"), std::string::npos) << out;
  EXPECT_EQ(Ccloctl({"comms", "show", "--help"}, out, err), 0);
  EXPECT_NE(out.find("Usage: ccloctl comms show"), std::string::npos) << out;
  EXPECT_EQ(Ccloctl({"stats", "--help"}, out, err), 0);
  EXPECT_NE(out.find("Usage: ccloctl stats"), std::string::npos) << out;
  EXPECT_EQ(Ccloctl({}, out, err), 2);
  EXPECT_EQ(Ccloctl({"status", "--bogus"}, out, err), 2);
  EXPECT_NE(err.find("--bogus"), std::string::npos) << err;
  EXPECT_EQ(Ccloctl({"--timeout", "-1", "status"}, out, err), 2);
}

}  // namespace
}  // namespace cclo::ccloctl
