// ccloctl: formatting of hand-made responses, and the commands against a real cclod.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
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
            "key                  value\n"
            "version              0.1.0\n");
  EXPECT_NE(table.find("\nuptime_seconds       3600\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\ndata_address         -\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\nops_completed        12345678901234\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\nwire_errors          0\n"), std::string::npos) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'),
            1 + v1::StatusResponse::descriptor()->field_count());
}

TEST(FormatTest, CommunicatorsTable) {
  EXPECT_EQ(CommunicatorsTable(SampleCommunicators()),
            "id                                size  local_ranks  state   ops  error\n"
            "00112233445566778899aabbccddeeff  4     0,2          ready   17   -\n"
            "ffeeddccbbaa99887766554433221100  2     -            broken  0    peer 10.0.0.2:7000 "
            "lost\n");
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
  EXPECT_EQ(Ccloctl({}, out, err), 2);
  EXPECT_EQ(Ccloctl({"status", "--bogus"}, out, err), 2);
  EXPECT_NE(err.find("--bogus"), std::string::npos) << err;
  EXPECT_EQ(Ccloctl({"--timeout", "-1", "status"}, out, err), 2);
}

}  // namespace
}  // namespace cclo::ccloctl
