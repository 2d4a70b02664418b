#include "hw/process.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "hw/types.h"

namespace cclo::hw {
namespace {

double Tick() { return 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK)); }

/// The boot time, seconds since the Unix epoch (/proc/stat's btime line).
absl::StatusOr<uint64_t> ReadBootTime() {
  absl::StatusOr<std::string> text = ReadTextFile("boot time", "/proc/stat");
  if (!text.ok()) return text.status();
  std::istringstream lines(*text);
  std::string key;
  uint64_t value = 0;
  while (lines >> key) {
    if (key == "btime" && lines >> value) return value;
  }
  return absl::NotFoundError("no btime line in /proc/stat");
}

}  // namespace

absl::StatusOr<ProcessStat> ReadProcessStat(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  absl::StatusOr<std::string> stat = ReadTextFile("process figures", path);
  if (!stat.ok()) return stat.status();
  // Fields after the command name (which may hold spaces and parentheses) start at field 3,
  // the state: utime and stime are fields 14 and 15, num_threads 20, starttime 22 (ticks
  // after the boot), vsize 23 (bytes) and rss 24 (pages).
  const size_t name_end = stat->rfind(')');
  if (name_end == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("no command name in ", path));
  }
  std::istringstream fields(stat->substr(name_end + 1));
  std::string skipped;
  for (int field = 3; field < 14; ++field) fields >> skipped;
  unsigned long long user_ticks = 0, system_ticks = 0, threads = 0, start_ticks = 0,
                     virtual_bytes = 0, resident_pages = 0;
  fields >> user_ticks >> system_ticks;
  for (int field = 16; field < 20; ++field) fields >> skipped;
  fields >> threads >> skipped >> start_ticks >> virtual_bytes >> resident_pages;
  if (!fields) return absl::NotFoundError(absl::StrCat("fewer than 24 fields in ", path));
  return ProcessStat{
      .cpu_seconds = static_cast<double>(user_ticks + system_ticks) * Tick(),
      .threads = threads,
      .virtual_bytes = virtual_bytes,
      .resident_bytes = resident_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)),
      .start_ticks = start_ticks};
}

absl::StatusOr<double> StartTimeSeconds(uint64_t start_ticks) {
  static std::atomic<uint64_t> boot_time{0};  // 0: not read yet, or the read failed
  if (boot_time.load(std::memory_order_relaxed) == 0) {
    absl::StatusOr<uint64_t> boot = ReadBootTime();
    if (!boot.ok()) return boot.status();
    boot_time.store(*boot, std::memory_order_relaxed);
  }
  return static_cast<double>(boot_time.load(std::memory_order_relaxed)) +
         static_cast<double>(start_ticks) * Tick();
}

absl::StatusOr<uint64_t> OpenDescriptors(pid_t pid) {
  struct stat fds {};
  if (stat(absl::StrCat("/proc/", pid, "/fd").c_str(), &fds) == 0 && fds.st_size > 0) {
    return static_cast<uint64_t>(fds.st_size);
  }
  return ListedDescriptors(pid);
}

absl::StatusOr<uint64_t> ListedDescriptors(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/fd");
  std::error_code error;
  uint64_t entries = 0;
  for (std::filesystem::directory_iterator it(path, error), end; !error && it != end;
       it.increment(error)) {
    ++entries;
  }
  if (error == std::errc::too_many_files_open) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot list ", path, ": ", error.message()));
  }
  if (error) return absl::NotFoundError(absl::StrCat("cannot list ", path, ": ", error.message()));
  return pid == getpid() && entries > 0 ? entries - 1 : entries;
}

}  // namespace cclo::hw
