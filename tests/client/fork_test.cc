// A process whose attach failed before it made a gRPC channel (no daemon yet, a wrong
// runtime dir) may fork workers that attach: only a channel made in a parent keeps a child
// from attaching. A target of its own, as libcclo counts a process's forks from its first
// channel on and any attach of an earlier test in the same binary would count them.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cclo/client.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

TEST(ForkTest, AChildOfAProcessWhoseAttachFailedAttaches) {
  absl::StatusOr<std::unique_ptr<Client>> failed = Client::Attach("/tmp/no-such-cclod-dir");
  ASSERT_FALSE(failed.ok());
  // Forked before the daemon, whose harness reads its output on a thread: ThreadSanitizer
  // ends a child of a process with threads that starts one, as the child's gRPC channel does.
  // The child learns the daemon's runtime dir through the pipe.
  int dir_pipe[2];
  ASSERT_EQ(pipe2(dir_pipe, O_CLOEXEC), 0);  // the daemon keeps no end
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: 1 the attach was refused; 2 a call on the attached client failed; 3 no dir.
    close(dir_pipe[1]);
    std::string dir;
    char byte = 0;
    while (read(dir_pipe[0], &byte, 1) == 1) dir.push_back(byte);
    if (dir.empty()) _exit(3);
    absl::StatusOr<std::unique_ptr<Client>> own = Client::Attach(dir);
    if (!own.ok()) _exit(1);
    _exit((*own)->CreateCommunicatorId().ok() ? 0 : 2);
  }
  close(dir_pipe[0]);
  testing::Daemon daemon;
  const std::string& dir = daemon.runtime_dir();
  ASSERT_EQ(write(dir_pipe[1], dir.data(), dir.size()), static_cast<ssize_t>(dir.size()));
  close(dir_pipe[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: the attach was refused; 2: a call on it failed; 3: no runtime dir";
}

}  // namespace
}  // namespace cclo
