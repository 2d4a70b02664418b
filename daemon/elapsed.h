// Durations on the monotonic clock. The wall clock (absl::Now, which deadlines use) may
// step back or forward when the time is set, and a duration taken from it would then be
// negative (lowering a histogram's sum) or wrong.
#pragma once

#include <chrono>

#include "absl/time/time.h"

namespace cclo::daemon {

using SteadyTime = std::chrono::steady_clock::time_point;

inline SteadyTime SteadyNow() { return std::chrono::steady_clock::now(); }

/// The time passed since `start`.
inline absl::Duration Since(SteadyTime start) { return absl::FromChrono(SteadyNow() - start); }

}  // namespace cclo::daemon
