// The harness itself: the processes it starts die with the process that started them, so
// a test or cclo-bench killed by a signal leaves no cclod or client behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

// Whether `pid` has ended: no such process, or a zombie its new parent has not reaped.
bool Ended(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t name_end = line.rfind(')');  // the state follows the command name
  return name_end != std::string::npos && name_end + 2 < line.size() &&
         (line[name_end + 2] == 'Z' || line[name_end + 2] == 'X');
}

TEST(HarnessTest, ProcessesDieWithTheProcessThatStartedThem) {
  Process parent({Runfile("tests/e2e/harness_parent")});
  ASSERT_TRUE(parent.WaitForOutput("waiting\n", absl::Seconds(60))) << parent.Output();
  // "daemon <pid> <runtime dir>", "sleep <pid>"
  std::vector<pid_t> children;
  std::string daemon_dir;
  for (absl::string_view line : absl::StrSplit(parent.Output(), '\n')) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    if (words.size() < 2 || (words[0] != "daemon" && words[0] != "sleep")) continue;
    pid_t pid = 0;
    ASSERT_TRUE(absl::SimpleAtoi(words[1], &pid)) << line;
    ASSERT_GT(pid, 0) << line;
    children.push_back(pid);
    if (words[0] == "daemon" && words.size() == 3) daemon_dir = words[2];
  }
  ASSERT_EQ(children.size(), 2u) << parent.Output();
  for (pid_t child : children) EXPECT_FALSE(Ended(child)) << "child " << child;

  parent.Signal(SIGKILL);
  EXPECT_EQ(parent.Wait(absl::Seconds(10)).exit_code, -1);
  for (pid_t child : children) {
    EXPECT_TRUE(WaitUntil([child] { return Ended(child); }, absl::Seconds(10)))
        << "child " << child << " outlived its parent";
  }
  // What the killed harness could not remove: the daemon's config and runtime dir.
  ASSERT_TRUE(absl::StartsWith(daemon_dir, "/tmp/cclo.")) << daemon_dir;
  std::error_code ignored;
  std::filesystem::remove_all(std::string(absl::StripSuffix(daemon_dir, "/run")), ignored);
}

}  // namespace
}  // namespace cclo::testing
