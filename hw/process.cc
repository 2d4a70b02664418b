#include "hw/process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace cclo::hw {
namespace {

/// The boot time, seconds since the Unix epoch (/proc/stat's btime line).
absl::StatusOr<uint64_t> BootTime() {
  std::ifstream file("/proc/stat");
  std::string key;
  uint64_t value = 0;
  while (file >> key) {
    if (key == "btime" && file >> value) return value;
    file.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return absl::InternalError("no btime in /proc/stat");
}

}  // namespace

absl::StatusOr<ProcessStat> ReadProcessStat(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  std::ifstream file(path);
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces and parentheses) start at field 3,
  // the state: utime and stime are fields 14 and 15, num_threads 20, starttime 22 (ticks
  // after boot), vsize 23 (bytes) and rss 24 (pages).
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  std::istringstream fields(stat.substr(name_end + 2));
  std::string skipped;
  for (int field = 3; field < 14; ++field) fields >> skipped;
  unsigned long long user_ticks = 0, system_ticks = 0, threads = 0, start_ticks = 0,
                     virtual_bytes = 0, resident_pages = 0;
  fields >> user_ticks >> system_ticks;
  for (int field = 16; field < 20; ++field) fields >> skipped;
  fields >> threads >> skipped >> start_ticks >> virtual_bytes >> resident_pages;
  if (!fields) return absl::InternalError(absl::StrCat("fewer than 24 fields in ", path));
  absl::StatusOr<uint64_t> boot = BootTime();
  if (!boot.ok()) return boot.status();
  const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return ProcessStat{
      .cpu_seconds = static_cast<double>(user_ticks + system_ticks) * tick,
      .threads = threads,
      .virtual_bytes = virtual_bytes,
      .resident_bytes = resident_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)),
      .start_time_seconds = static_cast<double>(*boot) + static_cast<double>(start_ticks) * tick};
}

absl::StatusOr<Descriptors> OwnDescriptors() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(absl::StrCat("getrlimit: ", std::strerror(errno)));
  }
  std::error_code error;
  uint64_t entries = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", error), end; !error && it != end;
       it.increment(error)) {
    ++entries;
  }
  if (error) return absl::InternalError(absl::StrCat("/proc/self/fd: ", error.message()));
  // The listing's own descriptor is among the entries and is not counted.
  return Descriptors{.open = entries > 0 ? entries - 1 : 0, .limit = limit.rlim_cur};
}

}  // namespace cclo::hw
