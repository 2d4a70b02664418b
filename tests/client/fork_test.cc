// A process whose attach failed before it made a gRPC channel (no daemon yet, a wrong
// runtime dir) may fork workers that attach: only a channel made in a parent keeps a child
// from attaching. A target of its own, as libcclo counts a process's forks from its first
// channel on and any attach of an earlier test in the same binary would count them.
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include "absl/status/statusor.h"
#include "cclo/client.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

TEST(ForkTest, AChildOfAProcessWhoseAttachFailedAttaches) {
  testing::Daemon daemon;
  absl::StatusOr<std::unique_ptr<Client>> failed = Client::Attach("/tmp/no-such-cclod-dir");
  ASSERT_FALSE(failed.ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: 1 the attach was refused; 2 a call on the attached client failed.
    absl::StatusOr<std::unique_ptr<Client>> own = Client::Attach(daemon.runtime_dir());
    if (!own.ok()) _exit(1);
    _exit((*own)->CreateCommunicatorId().ok() ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the attach was refused; 2: a call on it failed";
}

}  // namespace
}  // namespace cclo
