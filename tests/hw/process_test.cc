// hw::ReadProcessStat and hw::OwnDescriptors: the figures of Prometheus's process metrics,
// against what the kernel says of this process and of a child whose name holds spaces and
// parentheses.
#include "hw/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace cclo::hw {
namespace {

/// The Threads: line of /proc/self/status.
uint64_t ThreadsInStatus() {
  std::ifstream status("/proc/self/status");
  for (std::string key; status >> key;) {
    if (key == "Threads:") {
      uint64_t threads = 0;
      status >> threads;
      return threads;
    }
  }
  return 0;
}

TEST(ProcessStatTest, ThreadsAndMemoryOfThisProcess) {
  absl::StatusOr<ProcessStat> before = ReadProcessStat(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->threads, ThreadsInStatus());
  EXPECT_GT(before->resident_bytes, 0u);
  EXPECT_GE(before->virtual_bytes, before->resident_bytes);
  EXPECT_LE(before->start_time_seconds, static_cast<double>(absl::ToUnixSeconds(absl::Now()) + 1));

  absl::Notification done;
  std::thread thread([&done] { done.WaitForNotification(); });
  absl::StatusOr<ProcessStat> during = ReadProcessStat(getpid());
  done.Notify();
  thread.join();
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->threads, before->threads + 1);
  EXPECT_EQ(during->start_time_seconds, before->start_time_seconds);
}

TEST(ProcessStatTest, CpuTimeGrowsWithWork) {
  absl::StatusOr<ProcessStat> before = ReadProcessStat(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<ProcessStat> after = before;
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  volatile uint64_t work = 0;
  while (after.ok() && after->cpu_seconds <= before->cpu_seconds && absl::Now() < give_up) {
    for (int i = 0; i < 1000000; ++i) work = work + i;
    after = ReadProcessStat(getpid());
  }
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(after->cpu_seconds, before->cpu_seconds);
}

// The command name comes before the fields, in parentheses, and may hold both.
TEST(ProcessStatTest, AChildNamedWithSpacesAndParentheses) {
  int ready[2], hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(hold[1]);  // its read ends when the test closes the last write end
    prctl(PR_SET_NAME, "a) 1 2 (b");
    char byte = 0;
    (void)!write(ready[1], &byte, 1);
    (void)!read(hold[0], &byte, 1);
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
  std::string text;
  std::getline(stat, text);
  ASSERT_NE(text.find("(a) 1 2 (b)"), std::string::npos) << text;

  absl::StatusOr<ProcessStat> ours = ReadProcessStat(getpid());
  absl::StatusOr<ProcessStat> theirs = ReadProcessStat(child);
  close(hold[1]);
  close(ready[0]);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(theirs->threads, 1u);
  EXPECT_GE(theirs->start_time_seconds, ours->start_time_seconds);
  EXPECT_GT(theirs->resident_bytes, 0u);

  absl::StatusOr<ProcessStat> gone = ReadProcessStat(child);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
}

TEST(OwnDescriptorsTest, CountsWhatIsOpenAgainstTheSoftLimit) {
  absl::StatusOr<Descriptors> before = OwnDescriptors();
  ASSERT_TRUE(before.ok()) << before.status();
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(before->limit, limit.rlim_cur);

  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  absl::StatusOr<Descriptors> during = OwnDescriptors();
  close(fd);
  absl::StatusOr<Descriptors> after = OwnDescriptors();
  ASSERT_TRUE(during.ok()) << during.status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(during->open, before->open + 1);
  EXPECT_EQ(after->open, before->open);
}

}  // namespace
}  // namespace cclo::hw
