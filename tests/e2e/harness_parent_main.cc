// harness_parent: a user of the test harness made to be killed (harness_test). Starts a
// cclod and a /bin/sleep through the harness, prints
//
//   daemon <pid> <runtime dir>
//   sleep <pid>
//   waiting
//
// and blocks until it is killed; it gives up by itself after two minutes (then the
// harness stops both as usual).
#include <unistd.h>

#include <cstdio>

#include "absl/time/clock.h"
#include "tests/e2e/cluster.h"

int main() {
  cclo::testing::Daemon daemon;
  cclo::testing::Process sleeper({"/bin/sleep", "120"});
  std::printf("daemon %d %s\nsleep %d\nwaiting\n", daemon.process().pid(),
              daemon.runtime_dir().c_str(), sleeper.pid());
  std::fflush(stdout);
  absl::SleepFor(absl::Minutes(2));
  return 0;
}
