// hw::ReadProcessStat, StartTimeSeconds and OpenDescriptors: the figures of Prometheus's
// process metrics, against what the kernel says elsewhere of this process and of a child
// whose name holds spaces and parentheses.
#include "hw/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace cclo::hw {
namespace {

/// The number after `key` (e.g. "Threads:", "VmRSS:") in /proc/<pid>/status.
uint64_t StatusField(pid_t pid, const std::string& key) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string word; status >> word;) {
    uint64_t value = 0;
    if (word == key && status >> value) return value;
  }
  return 0;
}

double WallSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

TEST(ProcessStatTest, ThreadsOfThisProcess) {
  absl::StatusOr<ProcessStat> before = ReadProcessStat(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  absl::Notification done;
  std::thread thread([&done] { done.WaitForNotification(); });
  absl::StatusOr<ProcessStat> during = ReadProcessStat(getpid());
  const uint64_t status_threads = StatusField(getpid(), "Threads:");
  done.Notify();
  thread.join();
  ASSERT_TRUE(during.ok()) << during.status();
  // A sanitizer's runtime may start a thread of its own with the first one.
  EXPECT_EQ(during->threads, status_threads);
  EXPECT_GT(during->threads, before->threads);
  EXPECT_EQ(during->start_ticks, before->start_ticks);
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

// The command name comes before the fields, in parentheses, and may hold both. The child
// waits in a read meanwhile, so its memory stays as it is between the two files.
TEST(ProcessStatTest, AChildNamedWithSpacesAndParentheses) {
  int ready[2], hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  const double before_fork = WallSeconds();
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
  const double after_fork = WallSeconds();
  close(ready[1]);
  close(hold[0]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
  std::string text;
  std::getline(stat, text);
  EXPECT_NE(text.find("(a) 1 2 (b)"), std::string::npos) << text;

  absl::StatusOr<ProcessStat> theirs = ReadProcessStat(child);
  const uint64_t status_threads = StatusField(child, "Threads:");
  const uint64_t vm_size_kib = StatusField(child, "VmSize:");
  const uint64_t vm_rss_kib = StatusField(child, "VmRSS:");
  absl::StatusOr<uint64_t> open = OpenDescriptors(child);
  absl::StatusOr<uint64_t> listed = ListedDescriptors(child);
  close(hold[1]);
  close(ready[0]);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  // 1, but ThreadSanitizer starts its background thread again in a forked child.
  EXPECT_EQ(theirs->threads, status_threads);
  EXPECT_GE(theirs->threads, 1u);
  EXPECT_EQ(theirs->virtual_bytes, vm_size_kib << 10);
  // The kernel sums its per-CPU counts of resident pages for VmRSS, and /proc/<pid>/stat
  // gives their total as last folded in (up to a batch of pages per CPU behind).
  EXPECT_NEAR(static_cast<double>(theirs->resident_bytes), static_cast<double>(vm_rss_kib << 10),
              1 << 20);
  EXPECT_GT(theirs->resident_bytes, 0u);
  // The boot time is whole seconds, the start ticks of 1/100 s.
  absl::StatusOr<double> started = StartTimeSeconds(theirs->start_ticks);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_GE(*started, before_fork - 1.02);
  EXPECT_LE(*started, after_fork + 0.02);
  ASSERT_TRUE(open.ok()) << open.status();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*open, *listed);
  EXPECT_GE(*open, 3u);  // its pipe ends, and what it inherited

  absl::StatusOr<ProcessStat> gone = ReadProcessStat(child);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
}

TEST(OpenDescriptorsTest, CountsWhatIsOpen) {
  absl::StatusOr<uint64_t> before = OpenDescriptors(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(ListedDescriptors(getpid()).value_or(0), *before);
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  absl::StatusOr<uint64_t> during = OpenDescriptors(getpid());
  close(fd);
  absl::StatusOr<uint64_t> after = OpenDescriptors(getpid());
  ASSERT_TRUE(during.ok()) << during.status();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*during, *before + 1);
  EXPECT_EQ(*after, *before);
}

// At its descriptor limit a process cannot list /proc/self/fd, which takes one; the
// kernel's count (Linux 6.2 and later) needs none.
TEST(OpenDescriptorsTest, AtTheLimit) {
  absl::StatusOr<uint64_t> open = OpenDescriptors(getpid());
  ASSERT_TRUE(open.ok()) << open.status();
  struct stat fds {};
  ASSERT_EQ(stat("/proc/self/fd", &fds), 0);
  const bool kernel_counts = fds.st_size > 0;
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  // Below the lowest free number every one is open.
  const int lowest_free = dup(0);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit full = limit;
  full.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &full), 0);
  absl::StatusOr<uint64_t> counted = OpenDescriptors(getpid());
  absl::StatusOr<uint64_t> listed = ListedDescriptors(getpid());
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kResourceExhausted) << listed.status();
  if (kernel_counts) {
    ASSERT_TRUE(counted.ok()) << counted.status();
    EXPECT_EQ(*counted, *open);
  } else {
    EXPECT_EQ(counted.status().code(), absl::StatusCode::kResourceExhausted) << counted.status();
  }
}

}  // namespace
}  // namespace cclo::hw
