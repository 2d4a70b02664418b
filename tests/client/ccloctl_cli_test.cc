// The ccloctl binary as a shell sees it: every command and subcommand, found by reading
// the help itself, answers --help with exit 0 and its usage; failures (no daemon, a bad
// id, a bad argument) exit non-zero with the reason on stderr and nothing on stdout.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// Runs the ccloctl binary with `args`, stdout and stderr apart.
CliRun Ccloctl(const std::vector<std::string>& args) {
  char dir_template[] = "/tmp/cclo.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string err_path = dir + "/stderr";
  std::vector<std::string> command = {"/bin/sh", "-c", "exec \"$@\" 2>" + err_path, "sh",
                                      Runfile("client/ccloctl")};
  command.insert(command.end(), args.begin(), args.end());
  ProcessResult result = Process(command).Wait(absl::Seconds(30));
  std::stringstream err;
  err << std::ifstream(err_path).rdbuf();
  std::filesystem::remove_all(dir);
  return {result.exit_code, result.output, err.str()};
}

/// The names listed under "Subcommands:" in a help text.
std::vector<std::string> Subcommands(const std::string& help) {
  std::vector<std::string> names;
  bool listing = false;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    if (line == "Subcommands:") {
      listing = true;
    } else if (listing && absl::StartsWith(line, "  ")) {
      names.push_back(std::string(absl::StripLeadingAsciiWhitespace(line).substr(
          0, absl::StripLeadingAsciiWhitespace(line).find(' '))));
    } else if (listing && !line.empty()) {
      listing = false;
    }
  }
  return names;
}

/// Every command path below `path` (e.g. {"comms", "show"}), by asking each for --help,
/// which must answer with exit 0 and its usage line.
void Enumerate(const std::vector<std::string>& path, std::vector<std::vector<std::string>>& all) {
  std::vector<std::string> args = path;
  args.push_back("--help");
  const CliRun help = Ccloctl(args);
  const std::string name = absl::StrJoin(path, " ");
  EXPECT_EQ(help.exit_code, 0) << name << ": " << help.err;
  EXPECT_EQ(help.err, "") << name;
  EXPECT_NE(help.out.find(absl::StrCat("Usage: ccloctl", path.empty() ? "" : " ", name)),
            std::string::npos)
      << name << ":\n"
      << help.out;
  EXPECT_NE(help.out.find("-h,--help"), std::string::npos) << name << ":\n" << help.out;
  all.push_back(path);
  for (const std::string& sub : Subcommands(help.out)) {
    std::vector<std::string> child = path;
    child.push_back(sub);
    Enumerate(child, all);
  }
}

/// Arguments that let a command reach the daemon: the ones it checks itself first.
std::vector<std::string> ValidArguments(const std::string& name) {
  if (name == "policy set" || name == "policy validate") {
    const std::string file = std::string(std::getenv("TEST_TMPDIR")) + "/policy.yaml";
    std::ofstream(file) << "rules: []\n";
    return {file};
  }
  if (name == "policy explain") return {"--op", "allreduce"};
  return {};
}

/// A value for each required positional its help lists ("  id TEXT REQUIRED ...").
std::vector<std::string> RequiredPositionals(const std::vector<std::string>& path) {
  std::vector<std::string> args = path;
  args.push_back("--help");
  std::vector<std::string> values;
  for (absl::string_view line : absl::StrSplit(Ccloctl(args).out, '\n')) {
    if (absl::StrContains(line, " REQUIRED") && !absl::StartsWith(line, "  -")) {
      values.push_back("0");
    }
  }
  return values;
}

TEST(CcloctlCliTest, EveryCommandAnswersHelpAndFailsWithoutADaemon) {
  std::vector<std::vector<std::string>> commands;
  Enumerate({}, commands);
  // The root, its commands and the comms subcommands at least.
  std::vector<std::string> names;
  for (const auto& path : commands) names.push_back(absl::StrJoin(path, " "));
  for (const char* expected : {"status", "comms", "comms show", "comms destroy", "drain",
                               "policy get", "policy set", "policy validate", "policy explain"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end())
        << expected << " not in " << absl::StrJoin(names, ", ");
  }

  // Each command (with its required arguments) against a directory without a daemon; a
  // command that only groups others asks for one of them.
  for (const auto& path : commands) {
    if (path.empty()) continue;
    std::vector<std::string> args = {"--runtime-dir", "/tmp/no-such-cclod-dir"};
    args.insert(args.end(), path.begin(), path.end());
    const std::string name = absl::StrJoin(path, " ");
    const std::vector<std::string> valid = ValidArguments(name);
    args.insert(args.end(), valid.begin(), valid.end());
    if (valid.empty()) {
      for (const std::string& value : RequiredPositionals(path)) args.push_back(value);
    }
    const CliRun run = Ccloctl(args);
    if (absl::StrContains(run.err, ": a command is required: one of ")) {
      EXPECT_EQ(run.exit_code, 2) << name;
      continue;
    }
    EXPECT_EQ(run.exit_code, 1) << name << ": " << run.err;
    EXPECT_EQ(run.out, "") << name;
    EXPECT_TRUE(absl::StartsWith(
        run.err, "ccloctl: cannot reach cclod at unix:/tmp/no-such-cclod-dir/admin.sock"))
        << name << ": " << run.err;
  }
}

// A daemon that takes the connection but never answers (stopped, or stuck): the call ends
// at its deadline saying how long it waited.
TEST(CcloctlCliTest, DaemonThatDoesNotAnswerIsNamedWithTheWait) {
  char dir_template[] = "/tmp/cclo.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string path = dir + "/admin.sock";
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 8), 0);  // never accepted: the kernel queues the connection
  const CliRun run = Ccloctl({"--runtime-dir", dir, "--timeout", "0.5", "status"});
  close(listener);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, absl::StrCat("ccloctl: Status at unix:", path,
                                  ": no answer within 500ms (Deadline Exceeded)\n"));
}

TEST(CcloctlCliTest, BadArgumentsExitTwoWithTheReason) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "ccloctl: a command is required: one of status, comms, "},
      {{"frobnicate"}, "The following argument was not expected: frobnicate"},
      {{"policy"}, "ccloctl policy: a command is required: one of get, set, validate, explain"},
      // "A subcommand is required", not naming the word it did not know.
      {{"policy", "gte"}, "The following argument was not expected: gte"},
      {{"status", "--bogus"}, "--bogus"},
      {{"--timeout", "-1", "status"}, "--timeout"},
      // protobuf would not send the request, and the call failed with no reason.
      {{"comms", "show", "\xff"}, "id: is not UTF-8 text (byte 0xff at offset 0)"},
      {{"policy", "explain", "--op", "allreduce", "--tenant", "ab\xc3"},
       "--tenant: is not UTF-8 text (byte 0xc3 at offset 2)"},
      // Dialled /admin.sock.
      {{"--runtime-dir", "", "status"},
       "--runtime-dir: is empty; give the dir of cclod's sockets (as /run/cclod)"},
      {{"comms", "show"}, "id is required"},
      {{"comms", "destroy"}, "id is required"},
      {{"log-level"}, "level is required"},
      {{"drain", "--timeout", "0"}, "--timeout: 0 is not a number of seconds in [0.001, 86400]"},
      {{"drain", "--timeout", "nan"}, "--timeout: nan is not a number of seconds in"},
      {{"--timeout", "inf", "status"}, "--timeout: inf is not a number of seconds in"},
      {{"drain", "--timeout", "soon"}, "--timeout"},
      // strtod's own readings: hex 16 s, 1000 s.
      {{"drain", "--timeout", "0x10"}, "--timeout: 0x10 is not a number of seconds in"},
      {{"--timeout", "1e3", "status"}, "--timeout: 1e3 is not a number of seconds in"},
      {{"--timeout", " 5", "status"}, "--timeout:  5 is not a number of seconds in"},
      {{"--timeout", "1.2.3", "status"}, "--timeout: 1.2.3 is not a number of seconds in"},
      {{"policy", "explain", "--op", "allredcue"}, "ccloctl: --op "},
      {{"policy", "explain", "--op", "allreduce", "--datatype", "float33"}, "ccloctl: --datatype "},
      {{"policy", "explain", "--op", "allreduce", "--bytes", "12 apples"},
       "ccloctl: --bytes '12 apples' is not a byte size"},
      // 0 was taken as "not given" and explained for 2 ranks.
      {{"policy", "explain", "--op", "allreduce", "--world-size", "0"},
       "--world-size: Value 0 not in range 1 to 4294967295"},
      // Read as octal 8 and hex 16, and explained for that many ranks.
      {{"policy", "explain", "--op", "allreduce", "--world-size", "010"},
       "--world-size: 010 is not a decimal whole number"},
      {{"policy", "explain", "--op", "allreduce", "--world-size", "0x10"},
       "--world-size: 0x10 is not a decimal whole number"},
      // Said "at most 9223372036854775807", which the option does not hold.
      {{"policy", "explain", "--op", "allreduce", "--world-size", "18446744073709551616"},
       "--world-size: 18446744073709551616 is too large (at most 4294967295)"},
  };
  for (const auto& [args, reason] : cases) {
    const CliRun run = Ccloctl(args);
    const std::string name = absl::StrJoin(args, " ");
    EXPECT_EQ(run.exit_code, 2) << name << ": " << run.err;
    EXPECT_EQ(run.out, "") << name;
    EXPECT_NE(run.err.find(reason), std::string::npos) << name << ": " << run.err;
  }
}

TEST(CcloctlCliTest, RuntimeDirTooLongForASocketIsNamed) {
  // gRPC answered "Failed to create secure client channel", after two lines of its own log.
  const std::string dir = "/tmp/" + std::string(120, 'x');
  const CliRun run = Ccloctl({"--runtime-dir", dir, "status"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, absl::StrCat("ccloctl: socket path '", dir,
                                  "/admin.sock' has 136 bytes; at most 107 fit (give a shorter "
                                  "--runtime-dir)\n"));
}

TEST(CcloctlCliTest, PolicyFileThatCannotBeReadIsNamedWithTheReason) {
  // A directory read as an empty file, sent to the daemon and refused as a policy without
  // rules; a missing file was reported without the reason.
  char dir_template[] = "/tmp/cclo.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  for (const char* command : {"set", "validate"}) {
    const CliRun run = Ccloctl({"--runtime-dir", "/tmp/no-such-cclod-dir", "policy", command, dir});
    EXPECT_EQ(run.exit_code, 1) << command;
    EXPECT_EQ(run.out, "") << command;
    EXPECT_EQ(run.err, absl::StrCat("ccloctl: cannot read policy file ", dir, ": Is a directory\n"))
        << command;
  }
  // Sent as it was, the call failed with no reason.
  const std::string latin1 = dir + "/latin1.yaml";
  std::ofstream(latin1) << "rules: [] # caf\xe9\n";
  const CliRun latin =
      Ccloctl({"--runtime-dir", "/tmp/no-such-cclod-dir", "policy", "set", latin1});
  EXPECT_EQ(latin.exit_code, 1);
  EXPECT_EQ(latin.out, "");
  EXPECT_EQ(latin.err, absl::StrCat("ccloctl: policy file ", latin1,
                                    " is not UTF-8 text (byte 0xe9 at offset 15)\n"));
  std::filesystem::remove(latin1);
  const CliRun missing = Ccloctl(
      {"--runtime-dir", "/tmp/no-such-cclod-dir", "policy", "validate", dir + "/none.yaml"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, absl::StrCat("ccloctl: cannot read policy file ", dir,
                                      "/none.yaml: No such file or directory\n"));
  std::filesystem::remove_all(dir);
}

TEST(CcloctlCliTest, BadIdsAndValuesExitOneWithTheDaemonsReason) {
  Daemon daemon;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"comms", "show", "zz"}, "communicator id 'zz' is not a hex id or prefix"},
      {{"comms", "destroy", "zz"}, "communicator id 'zz' is not a hex id or prefix"},
      {{"comms", "destroy", "abc"}, "no communicator abc on this daemon"},
      {{"log-level", "loud"}, "log level 'loud' is not one of"},
  };
  for (const auto& [args, reason] : cases) {
    std::vector<std::string> command = {"--runtime-dir", daemon.runtime_dir()};
    command.insert(command.end(), args.begin(), args.end());
    const CliRun run = Ccloctl(command);
    const std::string name = absl::StrJoin(args, " ");
    EXPECT_EQ(run.exit_code, 1) << name << ": " << run.err;
    EXPECT_EQ(run.out, "") << name;
    EXPECT_NE(run.err.find(reason), std::string::npos) << name << ": " << run.err;
  }
}

}  // namespace
}  // namespace cclo::testing
