// libcclo's completion ring with several waiting threads. They share one doorbell, and a
// wake-up clears it for every reader; so one thread sleeps on it and the others wait for
// news from that one, and a thread that consumes a completion another waits for wakes
// that one, instead of leaving it asleep until its nap ends (100 ms; here an hour, past
// the waiters' 20 s deadlines, so that only the wake-up can end a sleep sooner).
// The daemon's side is the daemon's own SessionRing, in this process. Also: a closed ring
// refuses commands, and rings of another version are refused.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ring.h"
#include "daemon/session_ring.h"
#include "hw/clock.h"

namespace cclo::client {
namespace {

/// The system call thread `tid` of this process is in (-1 if running).
long SystemCall(pid_t tid) {
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long number = -1;
  file >> number;
  return number;
}

bool InPpoll(pid_t tid) { return SystemCall(tid) == SYS_ppoll; }

/// A ring whose daemon side is a SessionRing in this process; counts the naps that ended
/// without a wake-up (each runs the alive check).
struct Rings {
  Rings() {
    absl::StatusOr<std::unique_ptr<daemon::SessionRing>> made = daemon::SessionRing::Create();
    EXPECT_TRUE(made.ok()) << made.status();
    daemon_side = *std::move(made);
    const std::vector<int> fds = daemon_side->ClientFds();
    absl::StatusOr<std::unique_ptr<ClientRing>> mapped = ClientRing::Map(
        dup(fds[0]), ring::kRingBytes, dup(fds[1]), dup(fds[2]),
        [this] {
          naps.fetch_add(1);
          return absl::OkStatus();
        },
        absl::Hours(1));
    EXPECT_TRUE(mapped.ok()) << mapped.status();
    client = *std::move(mapped);
  }
  /// Posts the FINISHED of `cookie` without ringing, as when another sleeper's wake-up
  /// cleared the doorbell, and consumes it from this thread (looking for another result).
  void FinishQuietly(uint64_t cookie) {
    ring::CompletionSlot finished{};
    finished.cookie = cookie;
    finished.op_id = cookie;
    finished.kind = static_cast<uint32_t>(ring::CompletionKind::kFinished);
    EXPECT_TRUE(daemon_side->PostQuietly(finished));
    absl::StatusOr<std::optional<ring::CompletionSlot>> other =
        client->Finished(1, hw::SteadyNow());
    EXPECT_TRUE(other.ok() && !other->has_value()) << other.status();
  }

  std::unique_ptr<daemon::SessionRing> daemon_side;
  std::unique_ptr<ClientRing> client;
  std::atomic<int> naps{0};
};

/// A thread waiting for the result of `cookie` (at most 20 s).
struct Waiter {
  Waiter(ClientRing& client, uint64_t cookie)
      : thread([this, &client, cookie] {
          tid = gettid();
          result = client.Finished(cookie, hw::SteadyNow() + absl::Seconds(20));
        }) {}
  ~Waiter() {
    if (thread.joinable()) thread.join();  // its deadline ends its wait
  }
  /// Whether it is blocked in a sleep (on the doorbell or on the ring's mutex).
  bool Blocked() const {
    const long call = tid.load() == 0 ? -1 : SystemCall(tid.load());
    return call == SYS_ppoll || call == SYS_futex;
  }
  std::atomic<pid_t> tid{0};
  absl::StatusOr<std::optional<ring::CompletionSlot>> result;
  std::thread thread;
};

TEST(ClientRingTest, ACompletionOneThreadConsumesForAnotherWakesIt) {
  Rings rings;
  Waiter waiter(*rings.client, 7);
  const hw::SteadyTime give_up = hw::SteadyNow() + absl::Seconds(60);
  bool asleep = false;
  while (!asleep && hw::SteadyNow() < give_up) {
    absl::SleepFor(absl::Microseconds(100));
    asleep = waiter.tid.load() != 0 && InPpoll(waiter.tid.load());
  }
  ASSERT_TRUE(asleep) << "the waiter never slept on the doorbell";
  rings.FinishQuietly(7);
  waiter.thread.join();
  ASSERT_TRUE(waiter.result.ok()) << waiter.result.status();
  EXPECT_TRUE(waiter.result->has_value());
  EXPECT_EQ(rings.naps.load(), 0) << "the waiter slept until its deadline with its result here";
}

// Two threads wait, one of them on the doorbell; a third consumes first the result of one,
// then of the other, each posted without a ring. Each waiter gets its own at once.
TEST(ClientRingTest, TwoWaitersEachWakeForTheResultAnotherThreadConsumed) {
  Rings rings;
  Waiter first(*rings.client, 7);
  Waiter second(*rings.client, 9);
  const hw::SteadyTime give_up = hw::SteadyNow() + absl::Seconds(60);
  int quiet_looks = 0;  // both seen blocked in this many looks in a row
  while (quiet_looks < 20 && hw::SteadyNow() < give_up) {
    absl::SleepFor(absl::Microseconds(200));
    quiet_looks = first.Blocked() && second.Blocked() ? quiet_looks + 1 : 0;
  }
  ASSERT_EQ(quiet_looks, 20) << "the waiters never both slept";
  rings.FinishQuietly(7);
  first.thread.join();
  rings.FinishQuietly(9);
  second.thread.join();
  ASSERT_TRUE(first.result.ok() && second.result.ok())
      << first.result.status() << second.result.status();
  EXPECT_TRUE(first.result->has_value());
  EXPECT_TRUE(second.result->has_value());
  EXPECT_EQ(rings.naps.load(), 0) << "a waiter slept until its deadline with its result here";
}

// Once its session is closed here (the Client destroyed), the ring refuses an op before
// posting it: no daemon would take it (or one not yet aware of the end would run it).
TEST(ClientRingTest, AClosedRingRefusesAnOpWithoutPostingIt) {
  Rings rings;
  rings.client->Close();
  v1::SubmitRequest request;
  request.set_collective(v1::NOP);
  absl::StatusOr<std::pair<uint64_t, ClientRing::Accepted>> submitted =
      rings.client->Submit(request, {}, hw::SteadyNow() + absl::Seconds(1));
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(submitted.status().message(), "the session is closed");
  EXPECT_FALSE(rings.daemon_side->HasCommands());
}

// Rings of another version (a daemon of another release) are refused naming both versions,
// and the app lives on to say so.
TEST(ClientRingTest, RingsOfAnotherVersionAreRefusedNamingBoth) {
  absl::StatusOr<std::unique_ptr<daemon::SessionRing>> daemon_side = daemon::SessionRing::Create();
  ASSERT_TRUE(daemon_side.ok()) << daemon_side.status();
  const std::vector<int> fds = (*daemon_side)->ClientFds();
  void* base = mmap(nullptr, ring::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  ASSERT_NE(base, MAP_FAILED);
  ring::Header(base)->version = ring::kVersion + 1;
  munmap(base, ring::kRingBytes);
  absl::StatusOr<std::unique_ptr<ClientRing>> mapped = ClientRing::Map(
      dup(fds[0]), ring::kRingBytes, dup(fds[1]), dup(fds[2]), [] { return absl::OkStatus(); },
      absl::Hours(1));
  EXPECT_EQ(mapped.status(),
            absl::FailedPreconditionError(
                absl::StrCat("cclod's rings have magic 0x474e5243, version ", ring::kVersion + 1,
                             "; this libcclo speaks version ", ring::kVersion)));
}

}  // namespace
}  // namespace cclo::client
