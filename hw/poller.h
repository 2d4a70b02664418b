// Work that runs on the engine's own thread, between its turns: the daemon's command
// rings. The engine polls it on every turn, spins briefly after work instead of sleeping,
// and when it does sleep, the poller's fd wakes it.
#pragma once

#include "hw/clock.h"

namespace cclo::hw {

/// Every method runs on the engine thread and must not block.
class Poller {
 public:
  virtual ~Poller() = default;

  /// Readable when the poller may have work (epoll-able): the engine's sleep ends, and
  /// the engine calls Awake() to clear it.
  virtual int wake_fd() const = 0;
  /// Does the work that is ready; whether there was any.
  virtual bool Poll() = 0;
  /// The engine is about to sleep: from here on, new work makes wake_fd() readable.
  /// Returns the latest time to poll again: now or earlier if work is already waiting,
  /// SteadyTime::InfiniteFuture() if only wake_fd() matters.
  virtual SteadyTime Sleeping() = 0;
  /// The engine woke from the sleep Sleeping() announced, or found wake_fd() readable
  /// while awake: the poller clears wake_fd() (its work is taken at the next Poll()).
  virtual void Awake() = 0;
};

}  // namespace cclo::hw
