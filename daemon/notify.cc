#include "daemon/notify.h"

#include <systemd/sd-daemon.h>

#include <cstdint>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {

void NotifyReady() { sd_notify(0, "READY=1"); }

void NotifyReloading() { sd_notify(0, "RELOADING=1"); }

void NotifyStopping() { sd_notify(0, "STOPPING=1"); }

void NotifyWatchdog() { sd_notify(0, "WATCHDOG=1"); }

void FeedingWatchdog(absl::Duration watchdog_ping, absl::FunctionRef<void()> work) {
  if (watchdog_ping > absl::ZeroDuration()) {
    absl::Notification done;
    std::thread thread;
    const absl::Status started = hw::StartThread(thread, "a reload", [&] {
      work();
      done.Notify();
    });
    if (started.ok()) {
      int sent = 0;
      while (sent < kReloadPings) {
        NotifyWatchdog();
        ++sent;
        if (done.WaitForNotificationWithTimeout(watchdog_ping)) break;
      }
      if (!done.HasBeenNotified()) {
        spdlog::warn(
            "the reload still runs after {}: no longer feeding systemd's watchdog, "
            "which ends cclod if the reload does not finish",
            absl::FormatDuration(watchdog_ping * sent));
      }
      thread.join();
      return;
    }
    spdlog::warn("{}; reloading without feeding the watchdog meanwhile",
                 std::string(started.message()));
    NotifyWatchdog();
  }
  work();
}

absl::Duration WatchdogPingInterval() {
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) <= 0) return absl::ZeroDuration();
  return absl::Microseconds(watchdog_usec) / 2;
}

siginfo_t WaitForSignal(const sigset_t& signals, absl::Duration watchdog_ping) {
  siginfo_t signal{};
  if (watchdog_ping <= absl::ZeroDuration()) {
    while (sigwaitinfo(&signals, &signal) < 0) {
    }
    return signal;
  }
  const timespec interval = absl::ToTimespec(watchdog_ping);
  for (;;) {
    NotifyWatchdog();
    if (sigtimedwait(&signals, &signal, &interval) > 0) return signal;
  }
}

}  // namespace cclo::daemon
