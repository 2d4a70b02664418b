// LD_PRELOAD shim that steps one process's wall clock: CLOCK_REALTIME (and its coarse
// variant), gettimeofday and time read the real clock plus an offset in nanoseconds, an
// int64 at the start of the file named by CCLO_TEST_WALL_OFFSET_FILE, which the test maps
// too and changes while the process runs. The monotonic clocks are left alone. Without the
// variable (or with a file that cannot be mapped) the clocks are the real ones.
//
// A futex wait until an absolute wall time (FUTEX_CLOCK_REALTIME, as abseil's timed waits
// and so gRPC's make them, through syscall()) has the offset taken off again for the
// kernel, whose clock is not stepped: a wait that begins after a step lasts as long as it
// would after a real step.
//
// For tests only: a wall clock step cannot be made for one process otherwise, and stepping
// the machine's clock would disturb everything else on it.
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdlib>

namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

using ClockGettime = int (*)(clockid_t, timespec*);
using Syscall = long (*)(long, ...);  // NOLINT(runtime/int): syscall's own types

// The offset's mapping once looked for (nullptr before; &kNoOffset if there is none).
std::atomic<const int64_t*> offset_ptr{nullptr};
const int64_t kNoOffset = 0;

const int64_t* MapOffset() {
  const char* path = std::getenv("CCLO_TEST_WALL_OFFSET_FILE");
  if (path == nullptr) return &kNoOffset;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return &kNoOffset;
  void* mapped = mmap(nullptr, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return mapped == MAP_FAILED ? &kNoOffset : static_cast<const int64_t*>(mapped);
}

int64_t OffsetNanos() {
  const int64_t* offset = offset_ptr.load(std::memory_order_acquire);
  if (offset == nullptr) {
    // Racing threads may both map the file: the loser's mapping stays, harmlessly.
    const int64_t* mapped = MapOffset();
    if (!offset_ptr.compare_exchange_strong(offset, mapped, std::memory_order_acq_rel)) {
      if (mapped != &kNoOffset) munmap(const_cast<int64_t*>(mapped), sizeof(int64_t));
    } else {
      offset = mapped;
    }
  }
  return __atomic_load_n(offset, __ATOMIC_RELAXED);
}

// The next definition of `name` (libc's), looked up on first use. Not a function-local
// static: its initialisation guard makes a contending thread wait through syscall(), which
// this shim defines, and that wait would recurse until the stack overflowed. Threads that
// race here all store the same pointer.
template <typename Function>
Function Real(std::atomic<Function>& slot, const char* name) {
  Function real = slot.load(std::memory_order_acquire);
  if (real == nullptr) {
    real = reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
    slot.store(real, std::memory_order_release);
  }
  return real;
}

std::atomic<ClockGettime> real_clock_gettime{nullptr};
std::atomic<Syscall> real_syscall{nullptr};

void Shift(timespec* ts, int64_t offset) {
  int64_t nanos = ts->tv_nsec + offset % kNanosPerSecond;
  int64_t seconds = ts->tv_sec + offset / kNanosPerSecond + nanos / kNanosPerSecond;
  nanos %= kNanosPerSecond;
  if (nanos < 0) {
    nanos += kNanosPerSecond;
    --seconds;
  }
  ts->tv_sec = seconds;
  ts->tv_nsec = nanos;
}

}  // namespace

extern "C" {

int clock_gettime(clockid_t clock, timespec* ts) {
  const int result = Real(real_clock_gettime, "clock_gettime")(clock, ts);
  if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
    Shift(ts, OffsetNanos());
  }
  return result;
}

int gettimeofday(timeval* tv, void* timezone) {
  timespec now;
  if (clock_gettime(CLOCK_REALTIME, &now) != 0) return -1;
  tv->tv_sec = now.tv_sec;
  tv->tv_usec = now.tv_nsec / 1000;
  return 0;
}

// NOLINTNEXTLINE(runtime/int): syscall's own types
long syscall(long number, ...) {
  // As glibc's syscall does: six argument registers, whatever the call uses.
  va_list list;
  va_start(list, number);
  long args[6];                                     // NOLINT(runtime/int)
  for (long& arg : args) arg = va_arg(list, long);  // NOLINT(runtime/int)
  va_end(list);
  const int op = static_cast<int>(args[1]);
  timespec until;
  if (number == SYS_futex && (op & FUTEX_CLOCK_REALTIME) != 0 &&
      (op & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET && args[3] != 0) {
    until = *reinterpret_cast<const timespec*>(args[3]);
    Shift(&until, -OffsetNanos());
    args[3] = reinterpret_cast<long>(&until);  // NOLINT(runtime/int)
  }
  return Real(real_syscall, "syscall")(number, args[0], args[1], args[2], args[3], args[4],
                                       args[5]);
}

time_t time(time_t* out) {
  timespec now;
  if (clock_gettime(CLOCK_REALTIME, &now) != 0) return static_cast<time_t>(-1);
  if (out != nullptr) *out = now.tv_sec;
  return now.tv_sec;
}

}  // extern "C"
