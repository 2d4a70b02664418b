// A runtime dir belongs to one cclod: a second daemon given the same one refuses to start,
// naming the holder, and the first keeps serving; once the first has stopped, a daemon
// may start there. One that another user made, or may write, is refused.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

// Writes to `path` the config of a daemon on free ports whose runtime dir is `runtime_dir`.
void WriteConfig(const std::string& path, const std::string& runtime_dir) {
  std::ofstream(path) << "runtime_dir: " << runtime_dir << "\nhost: 127.0.0.1\n"
                      << "peer_port: 0\ndata_port: 0\nmetrics_port: 0\n";
}

// That config, in a fresh dir.
std::string ConfigFor(const std::string& runtime_dir, std::string& config_dir) {
  char dir[] = "/tmp/cclo.XXXXXX";
  config_dir = mkdtemp(dir);
  const std::string path = config_dir + "/cclod.yaml";
  WriteConfig(path, runtime_dir);
  return path;
}

// cclod run with `config` until it ends (one that starts is stopped after 30 s).
ProcessResult RunWith(const std::string& config) {
  return Process({Runfile("daemon/cclod"), "--config", config}).Wait(absl::Seconds(30));
}

TEST(RuntimeLockTest, SecondDaemonOnTheSameDirRefusesToStartAndTheFirstServesOn) {
  Daemon first;
  std::string config_dir;
  const std::string config = ConfigFor(first.runtime_dir(), config_dir);

  ProcessResult second = RunWith(config);
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_TRUE(absl::StrContains(
      second.output, absl::StrCat("cclod cannot start: runtime dir ", first.runtime_dir(),
                                  " is in use by another cclod (pid ", first.process().pid(),
                                  "); give each daemon its own runtime_dir")))
      << second.output;

  // The lock file names the holder and only cclod's user may open it.
  const std::string lock_file = first.runtime_dir() + "/cclod.lock";
  struct stat lock_stat {};
  ASSERT_EQ(stat(lock_file.c_str(), &lock_stat), 0);
  EXPECT_EQ(lock_stat.st_mode & 0777, 0600u);
  std::string holder;
  std::ifstream(lock_file) >> holder;
  EXPECT_EQ(holder, std::to_string(first.process().pid()));

  // The first daemon's sockets are still its own: a client attaches and gets a buffer.
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(first.runtime_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->AllocBuffer(4096).ok());
  EXPECT_FALSE(NewToken(first).empty());
  client->reset();

  // Once the first has stopped, the dir is free again.
  first.process().Signal(SIGTERM);
  EXPECT_EQ(first.process().Wait(absl::Seconds(15)).exit_code, 0);
  Process third({Runfile("daemon/cclod"), "--config", config});
  EXPECT_TRUE(third.WaitForOutput("ready: peer", absl::Seconds(30))) << third.Output();
  third.Signal(SIGTERM);
  EXPECT_EQ(third.Wait(absl::Seconds(15)).exit_code, 0) << third.Output();
  std::filesystem::remove_all(config_dir);
}

TEST(RuntimeLockTest, ARuntimeDirAnotherUserMayWriteIsRefused) {
  // A tenant made the dir before the daemon started (in a shared /tmp, say): it could
  // replace attach.sock with its own and answer other tenants' attaches.
  std::string config_dir;
  const std::string config = ConfigFor("", config_dir);
  const std::string runtime_dir = config_dir + "/run";
  ASSERT_EQ(mkdir(runtime_dir.c_str(), 0777), 0);
  ASSERT_EQ(chown(runtime_dir.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(runtime_dir.c_str(), 0777), 0);
  WriteConfig(config, runtime_dir);
  ProcessResult refused = RunWith(config);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(absl::StrContains(
      refused.output, absl::StrCat("cclod cannot start: runtime dir ", runtime_dir,
                                   " (owner uid 65534, mode 0777) must be a directory of "
                                   "cclod's user (uid 0) that no one else may write: another "
                                   "user could replace its sockets")))
      << refused.output;
  EXPECT_FALSE(std::filesystem::exists(runtime_dir + "/attach.sock"));

  // Nor may the dir be a link, even to one of cclod's own.
  ASSERT_EQ(rmdir(runtime_dir.c_str()), 0);
  ASSERT_EQ(mkdir((config_dir + "/own").c_str(), 0755), 0);
  ASSERT_EQ(symlink((config_dir + "/own").c_str(), runtime_dir.c_str()), 0);
  refused = RunWith(config);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "(owner uid 0, mode 0777, a symbolic link)"))
      << refused.output;

  // Nor a file: making it failed 'Not a directory' with exit code 1, which systemd retries.
  ASSERT_EQ(unlink(runtime_dir.c_str()), 0);
  ASSERT_EQ(mkfifo(runtime_dir.c_str(), 0644), 0);
  ASSERT_EQ(chmod(runtime_dir.c_str(), 0644), 0);
  refused = RunWith(config);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output,
                                absl::StrCat("cclod cannot start: runtime dir ", runtime_dir,
                                             " (owner uid 0, mode 0644, not a directory) must be a "
                                             "directory of cclod's user")))
      << refused.output;
  std::filesystem::remove_all(config_dir);
}

TEST(RuntimeLockTest, ARuntimeDirInADirOthersMayWriteIsRefused) {
  // Whoever may write the dir above could rename the runtime dir away and put theirs there.
  std::string config_dir;
  const std::string config = ConfigFor("", config_dir);
  const std::string above = config_dir + "/shared";
  const std::string runtime_dir = above + "/run";
  ASSERT_EQ(mkdir(above.c_str(), 0755), 0);
  ASSERT_EQ(chmod(above.c_str(), 0777), 0);
  WriteConfig(config, runtime_dir);
  ProcessResult refused = RunWith(config);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(absl::StrContains(
      refused.output,
      absl::StrCat("cclod cannot start: runtime dir ", runtime_dir, " is in ", above,
                   " (owner uid 0, mode 0777), where another user could replace it: each dir "
                   "above it must be root's or cclod's user's, and writable by others only "
                   "with the sticky bit (as /tmp)")))
      << refused.output;
  EXPECT_FALSE(std::filesystem::exists(runtime_dir + "/attach.sock"));

  // With the sticky bit, as /tmp has, others cannot move what is not theirs: it starts.
  ASSERT_EQ(chmod(above.c_str(), 01777), 0);
  Process started({Runfile("daemon/cclod"), "--config", config});
  EXPECT_TRUE(started.WaitForOutput("ready: peer", absl::Seconds(30))) << started.Output();
  started.Signal(SIGTERM);
  EXPECT_EQ(started.Wait(absl::Seconds(15)).exit_code, 0) << started.Output();
  std::filesystem::remove_all(config_dir);
}

}  // namespace
}  // namespace cclo::testing
