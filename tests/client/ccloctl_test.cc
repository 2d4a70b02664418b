// ccloctl: formatting of hand-made responses, and the commands against the fake daemon.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "client/ccloctl/commands.h"
#include "client/ccloctl/format.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/client/fake_daemon.h"

namespace cclo::ccloctl {
namespace {

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

TEST(CommandsTest, StatusAndCommsAgainstADaemon) {
  testing::FakeDaemon daemon;
  daemon.status() = SampleStatus();
  daemon.communicators() = SampleCommunicators();
  std::string out, err;
  EXPECT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "status"}, out, err), 0) << err;
  EXPECT_EQ(out, StatusTable(SampleStatus()));
  EXPECT_EQ(Ccloctl({"comms", "--runtime-dir", daemon.runtime_dir(), "--json"}, out, err), 0)
      << err;
  EXPECT_EQ(out, *ToJson(SampleCommunicators()));
  EXPECT_EQ(Ccloctl({"--runtime-dir", daemon.runtime_dir(), "comms"}, out, err), 0) << err;
  EXPECT_EQ(out, CommunicatorsTable(SampleCommunicators()));
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
