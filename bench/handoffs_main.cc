// handoffs: what it costs on this machine to hand work from one process to another, the
// floor under a small op's latency: a client and its daemon are two processes, and a
// collective between two daemons involves two more. docs/performance.md.
//
//   SystemCall            entering the kernel and back (getppid)
//   Handoff/vcpus/yield   a round trip between two processes through shared memory, each
//                         waiting by sched_yield (yield:1) or by spinning (yield:0), on one
//                         vCPU or two
//   EventfdWake/vcpus/idle_us
//                         a process blocked in ppoll on an eventfd, woken by a write from
//                         one on the same vCPU or another, after idle_us of nothing to do;
//                         the time is the wake-up latency, write_us the writer's system call
//   FutexWake/vcpus/idle_us
//                         the same with a process blocked in FUTEX_WAIT on a shared word,
//                         woken by FUTEX_WAKE (wake_us the waker's system call)
//
//   bazel build //bench:handoffs && bazel-bin/bench/handoffs
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <new>
#include <vector>

#include "benchmark/benchmark.h"

namespace cclo::bench {
namespace {

/// Longest one process waits for the other before the benchmark gives up.
constexpr int64_t kPatienceNs = 10'000'000'000;

/// What the two processes share.
struct Shared {
  std::atomic<uint64_t> turn;
  std::atomic<int64_t> woke_ns;
  std::atomic<uint32_t> futex_word;  ///< FutexWake: the round the waiter may go on to
  std::atomic<bool> child_failed;    ///< the child could not pin itself or do its part
};
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "atomics shared between processes must not hide a lock");

int64_t NowNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

/// The first `count` vCPUs this process may run on (fewer if it has fewer).
std::vector<int> AllowedCpus(size_t count) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < count; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  return cpus;
}

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

/// Runs `work` in a child process pinned to `cpu`, which dies with this process; its pid,
/// or -1. A child that cannot pin itself or whose `work` fails says so in `shared`.
pid_t StartChild(int cpu, Shared& shared, const std::function<bool()>& work) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);  // orphaned
  if (!Pin(cpu) || !work()) shared.child_failed.store(true);
  _exit(0);
}

/// Pins this process to a vCPU and the child to the same one or another, runs `parent`
/// (the timed loop), then ends the child and undoes the pinning.
void WithChild(benchmark::State& state, bool same_vcpu, Shared& shared,
               const std::function<bool()>& child, const std::function<void()>& parent) {
  const std::vector<int> cpus = AllowedCpus(same_vcpu ? 1 : 2);
  cpu_set_t before;
  if (cpus.size() < (same_vcpu ? 1u : 2u) || sched_getaffinity(0, sizeof(before), &before) != 0) {
    return state.SkipWithError(same_vcpu ? "no vCPU to pin to" : "needs two vCPUs");
  }
  if (!Pin(cpus[0])) return state.SkipWithError("cannot pin this process");
  const pid_t pid = StartChild(cpus.back(), shared, child);
  if (pid < 0) {
    state.SkipWithError("fork failed");
  } else {
    parent();
    kill(pid, SIGKILL);  // it is done, or stuck after a failure here
    waitpid(pid, nullptr, 0);
  }
  sched_setaffinity(0, sizeof(before), &before);
}

Shared* MapShared() {
  void* memory =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return memory == MAP_FAILED ? nullptr : new (memory) Shared{};
}

/// Whether the child wrote `answer` (which is then read) before it failed or kPatienceNs
/// passed.
bool Answered(int answer, const Shared& shared) {
  for (int polls = 0; polls < kPatienceNs / 100'000'000 && !shared.child_failed.load(); ++polls) {
    pollfd ready{answer, POLLIN, 0};
    if (poll(&ready, 1, 100) == 1) {
      uint64_t count = 0;
      return read(answer, &count, sizeof(count)) == sizeof(count);
    }
  }
  return false;
}

void SystemCall(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(syscall(SYS_getppid));
}
BENCHMARK(SystemCall)->Unit(benchmark::kMicrosecond);

void Handoff(benchmark::State& state) {
  const bool same_vcpu = state.range(0) == 1, yield = state.range(1) == 1;
  Shared* shared = MapShared();
  if (shared == nullptr) return state.SkipWithError("mmap failed");
  // Waits for `turn`; false once the child failed or kPatienceNs passed. The clock is read
  // only once it has waited a while, to keep it out of the round trips timed.
  auto await = [&](uint64_t turn) {
    int64_t give_up = 0;
    for (uint32_t spins = 1; shared->turn.load(std::memory_order_acquire) != turn; ++spins) {
      if (yield) {
        sched_yield();
      } else {
        __builtin_ia32_pause();
      }
      if (spins % 1024 != 0) continue;
      const int64_t now = NowNs();
      if (give_up == 0) give_up = now + kPatienceNs;
      if (shared->child_failed.load() || now > give_up) return false;
    }
    return true;
  };
  const benchmark::IterationCount rounds = state.max_iterations;
  WithChild(
      state, same_vcpu, *shared,
      [&] {
        for (benchmark::IterationCount i = 0; i < rounds; ++i) {
          if (!await(2 * static_cast<uint64_t>(i) + 1)) return false;
          shared->turn.store(2 * static_cast<uint64_t>(i) + 2, std::memory_order_release);
        }
        return true;
      },
      [&] {
        uint64_t i = 0;
        for (auto _ : state) {
          shared->turn.store(2 * i + 1, std::memory_order_release);
          if (!await(2 * i + 2)) return state.SkipWithError("the other process stopped answering");
          ++i;
        }
      });
  munmap(shared, sizeof(Shared));
}
// Spinning on one vCPU would wait out the scheduler's time slices: not measured.
BENCHMARK(Handoff)
    ->ArgNames({"vcpus", "yield"})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({2, 0})
    ->Iterations(20000)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

/// Times wake-ups of a blocked process: the child waits for each round with `wait`, which
/// calls `woke` as it returns from its blocking call; the parent, after idle_us, starts round
/// r with `wake(r)`. The time is the wake-up latency; `counter` the waker's system call.
void TimeWakeUps(benchmark::State& state, Shared& shared, const char* counter,
                 const std::function<bool(uint32_t round, const std::function<void()>& woke)>& wait,
                 const std::function<bool(uint32_t round)>& wake) {
  const bool same_vcpu = state.range(0) == 1;
  const int idle_us = static_cast<int>(state.range(1));
  const int answer = eventfd(0, 0);
  if (answer < 0) return state.SkipWithError("eventfd failed");
  const benchmark::IterationCount rounds = state.max_iterations;
  int64_t wake_ns = 0;
  WithChild(
      state, same_vcpu, shared,
      [&] {
        const uint64_t one = 1;
        for (benchmark::IterationCount i = 0; i < rounds; ++i) {
          if (!wait(static_cast<uint32_t>(i + 1), [&] { shared.woke_ns.store(NowNs()); }) ||
              write(answer, &one, sizeof(one)) != sizeof(one)) {
            return false;
          }
        }
        return true;
      },
      [&] {
        uint32_t round = 0;
        for (auto _ : state) {
          usleep(idle_us);
          const int64_t start = NowNs();
          const bool rang = wake(++round);
          wake_ns += NowNs() - start;
          if (!rang || !Answered(answer, shared)) {
            return state.SkipWithError("the other process stopped answering");
          }
          state.SetIterationTime(static_cast<double>(shared.woke_ns.load() - start) * 1e-9);
        }
      });
  state.counters[counter] =
      benchmark::Counter(static_cast<double>(wake_ns) * 1e-3, benchmark::Counter::kAvgIterations);
  close(answer);
}

/// The cases every wake-up benchmark runs: same vCPU or two, at once or after 100 µs idle.
void WakeUpArgs(benchmark::internal::Benchmark* cases) {
  cases->ArgNames({"vcpus", "idle_us"})
      ->ArgsProduct({{1, 2}, {0, 100}})
      ->Iterations(2000)
      ->Unit(benchmark::kMicrosecond)
      ->UseManualTime();
}

void EventfdWake(benchmark::State& state) {
  Shared* shared = MapShared();
  const int doorbell = eventfd(0, 0);
  if (shared == nullptr || doorbell < 0) {
    state.SkipWithError("mmap or eventfd failed");
  } else {
    TimeWakeUps(
        state, *shared, "write_us",
        [&](uint32_t, const std::function<void()>& woke) {
          pollfd ready{doorbell, POLLIN, 0};
          if (ppoll(&ready, 1, nullptr, nullptr) != 1) return false;
          woke();
          uint64_t count = 0;
          return read(doorbell, &count, sizeof(count)) == sizeof(count);
        },
        [&](uint32_t) {
          const uint64_t one = 1;
          return write(doorbell, &one, sizeof(one)) == sizeof(one);
        });
  }
  if (doorbell >= 0) close(doorbell);
  if (shared != nullptr) munmap(shared, sizeof(Shared));
}
BENCHMARK(EventfdWake)->Apply(WakeUpArgs);

void FutexWake(benchmark::State& state) {
  Shared* shared = MapShared();
  if (shared == nullptr) {
    state.SkipWithError("mmap failed");
  } else {
    // For the kernel, which compares the word itself (a lock-free atomic is the plain word).
    auto* word = reinterpret_cast<uint32_t*>(&shared->futex_word);
    TimeWakeUps(
        state, *shared, "wake_us",
        [&](uint32_t round, const std::function<void()>& woke) {
          for (uint32_t seen;
               (seen = shared->futex_word.load(std::memory_order_acquire)) != round;) {
            syscall(SYS_futex, word, FUTEX_WAIT, seen, nullptr, nullptr, 0);
          }
          woke();
          return true;
        },
        [&](uint32_t round) {
          shared->futex_word.store(round, std::memory_order_release);
          return syscall(SYS_futex, word, FUTEX_WAKE, 1, nullptr, nullptr, 0) >= 0;
        });
  }
  if (shared != nullptr) munmap(shared, sizeof(Shared));
}
BENCHMARK(FutexWake)->Apply(WakeUpArgs);

}  // namespace
}  // namespace cclo::bench

BENCHMARK_MAIN();
