// libcclo's completion ring with several waiting threads. They share one doorbell, and a
// sleeper that wakes clears it for all; so a thread that consumes a completion another
// waits for wakes that one, instead of leaving it asleep until its nap ends (100 ms; here
// the waiter's 20 s deadline, so that only the wake-up can end it sooner).
// The daemon's side is the daemon's own SessionRing, in this process.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/ring.h"
#include "daemon/session_ring.h"

namespace cclo::client {
namespace {

/// Whether thread `tid` of this process is blocked in ppoll.
bool InPpoll(pid_t tid) {
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long number = -1;
  file >> number;
  return number == SYS_ppoll;
}

TEST(ClientRingTest, ACompletionOneThreadConsumesForAnotherWakesIt) {
  absl::StatusOr<std::unique_ptr<daemon::SessionRing>> daemon_side = daemon::SessionRing::Create();
  ASSERT_TRUE(daemon_side.ok()) << daemon_side.status();
  const std::vector<int> fds = (*daemon_side)->ClientFds();
  std::atomic<int> naps{0};  // the alive check runs after each nap that nothing rang
  absl::StatusOr<std::unique_ptr<ClientRing>> client = ClientRing::Map(
      dup(fds[0]), ring::kRingBytes, dup(fds[1]), dup(fds[2]),
      [&] {
        naps.fetch_add(1);
        return absl::OkStatus();
      },
      absl::Hours(1));
  ASSERT_TRUE(client.ok()) << client.status();

  constexpr uint64_t kCookie = 7;
  std::atomic<pid_t> waiter_tid{0};
  absl::StatusOr<std::optional<v1::WaitResponse>> waited;
  std::thread waiter([&] {
    waiter_tid = gettid();
    waited = (*client)->Finished(kCookie, absl::Now() + absl::Seconds(20));
  });
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  bool asleep = false;
  while (!asleep && absl::Now() < give_up) {
    absl::SleepFor(absl::Microseconds(100));
    asleep = waiter_tid.load() != 0 && InPpoll(waiter_tid.load());
  }
  if (!asleep) {
    waiter.join();  // its deadline ends its wait
    FAIL() << "the waiter never slept on the doorbell";
  }
  // Its result comes without a ring (as when another sleeper's wake-up cleared the
  // doorbell), and this thread consumes it while it looks for a result of its own.
  EXPECT_TRUE((*daemon_side)
                  ->PostQuietly(ring::EncodeCompletion(ring::CompletionKind::kFinished, kCookie,
                                                       /*op_id=*/1, v1::WaitResponse())));
  absl::StatusOr<std::optional<v1::WaitResponse>> other = (*client)->Finished(8, absl::Now());
  EXPECT_TRUE(other.ok() && !other->has_value()) << other.status();
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_TRUE(waited->has_value());
  EXPECT_EQ(naps.load(), 0) << "the waiter slept until its deadline with its result here";
}

}  // namespace
}  // namespace cclo::client
