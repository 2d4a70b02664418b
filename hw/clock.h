// Deadlines, timeouts and elapsed times, on the monotonic clock.
//
// The wall clock (absl::Now, CLOCK_REALTIME) steps when the time is set (an NTP step, an
// operator's `date -s`): a deadline on it would expire at once after a step forward and
// hours late after one back, and a duration taken from it would be wrong or negative. So
// the daemon, the engine and libcclo time everything on the monotonic clock
// (std::chrono::steady_clock, CLOCK_MONOTONIC), and read the wall clock only for dates
// shown to people.
//
// SteadyTime is a type of its own, neither absl::Time nor a std::chrono time point:
// - it cannot be passed where a wall time is expected: abseil's Mutex::AwaitWithDeadline,
//   LockWhenWithDeadline and CondVar::WaitWithDeadline read an absl::Time as wall time
//   (wait with AwaitUntil below, or a ...WithTimeout variant for Left(deadline) in a loop
//   that checks the deadline again), and so does absl::ToChronoTime;
// - it keeps absl::Time's arithmetic with absl::Duration, which saturates at
//   InfiniteFuture() and InfinitePast() (a steady_clock time point would overflow there).
#pragma once

#include <algorithm>
#include <chrono>
#include <compare>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace cclo::hw {

/// A point on the monotonic clock (see above).
class SteadyTime {
 public:
  /// The clock's epoch (about when the machine booted): before any SteadyNow().
  constexpr SteadyTime() = default;

  static constexpr SteadyTime InfiniteFuture() { return SteadyTime(absl::InfiniteDuration()); }
  static constexpr SteadyTime InfinitePast() { return SteadyTime(-absl::InfiniteDuration()); }

  SteadyTime& operator+=(absl::Duration d) {
    since_epoch_ += d;
    return *this;
  }
  SteadyTime& operator-=(absl::Duration d) {
    since_epoch_ -= d;
    return *this;
  }
  friend SteadyTime operator+(SteadyTime t, absl::Duration d) { return t += d; }
  friend SteadyTime operator+(absl::Duration d, SteadyTime t) { return t += d; }
  friend SteadyTime operator-(SteadyTime t, absl::Duration d) { return t -= d; }
  friend absl::Duration operator-(SteadyTime a, SteadyTime b) {
    return a.since_epoch_ - b.since_epoch_;
  }
  friend constexpr bool operator==(SteadyTime a, SteadyTime b) {
    return a.since_epoch_ == b.since_epoch_;
  }
  friend constexpr std::strong_ordering operator<=>(SteadyTime a, SteadyTime b) {
    if (a.since_epoch_ < b.since_epoch_) return std::strong_ordering::less;
    if (b.since_epoch_ < a.since_epoch_) return std::strong_ordering::greater;
    return std::strong_ordering::equal;
  }

 private:
  friend SteadyTime SteadyNow();
  constexpr explicit SteadyTime(absl::Duration since_epoch) : since_epoch_(since_epoch) {}

  absl::Duration since_epoch_;
};

/// Now, on the monotonic clock.
inline SteadyTime SteadyNow() {
  return SteadyTime(absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch()));
}

/// The time passed since `start`.
inline absl::Duration Since(SteadyTime start) { return SteadyNow() - start; }

/// The time left until `deadline`: zero once it passed, absl::InfiniteDuration() for
/// SteadyTime::InfiniteFuture(). What abseil's ...WithTimeout waits take.
inline absl::Duration Left(SteadyTime deadline) {
  return std::max(deadline - SteadyNow(), absl::ZeroDuration());
}

/// Waits on `mu`, held, until `condition` holds (true) or `deadline` passes (false): what
/// mu.AwaitWithDeadline would do with a deadline on the monotonic clock. Each wait is for
/// the time left, so a step of the wall clock before it changes nothing. (The abseil of
/// Debian 12, 20220623, still sleeps a ...WithTimeout wait until a wall time: one already
/// asleep when the clock steps back ends late unless woken; every wait here is woken by
/// what it waits for, and only its ending by time could be late.)
inline bool AwaitUntil(absl::Mutex& mu, const absl::Condition& condition, SteadyTime deadline)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  while (!mu.AwaitWithTimeout(condition, Left(deadline))) {
    if (SteadyNow() >= deadline) return false;
  }
  return true;
}

// gRPC takes and gives deadlines on the wall clock, and converts them to its own monotonic
// clock when it reads them: these two are the only crossings, and carry the time left.

/// A deadline on the wall clock (as grpc::ServerContext::deadline() gives it) as the same
/// time left on the monotonic clock; InfiniteFuture() for none.
inline SteadyTime FromWallDeadline(std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return SteadyTime::InfiniteFuture();
  }
  return SteadyNow() + (absl::FromChrono(deadline) - absl::Now());
}

/// `deadline` as the same time left on the wall clock, for a gRPC client deadline
/// (ClientContext::set_deadline, Channel::WaitForConnected); time_point::max() for none.
inline std::chrono::system_clock::time_point ToWallDeadline(SteadyTime deadline) {
  if (deadline == SteadyTime::InfiniteFuture()) return std::chrono::system_clock::time_point::max();
  return absl::ToChronoTime(absl::Now() + (deadline - SteadyNow()));
}

}  // namespace cclo::hw
