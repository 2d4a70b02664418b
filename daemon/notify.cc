#include "daemon/notify.h"

#include <systemd/sd-daemon.h>

#include <cstdint>

namespace cclo::daemon {

void NotifyReady() { sd_notify(0, "READY=1"); }

void NotifyReloading() { sd_notify(0, "RELOADING=1"); }

void NotifyStopping() { sd_notify(0, "STOPPING=1"); }

absl::Duration WatchdogPingInterval() {
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) <= 0) return absl::ZeroDuration();
  return absl::Microseconds(watchdog_usec) / 2;
}

int WaitForSignal(const sigset_t& signals, absl::Duration watchdog_ping) {
  if (watchdog_ping <= absl::ZeroDuration()) {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    return signal_number;
  }
  const timespec interval = absl::ToTimespec(watchdog_ping);
  for (;;) {
    sd_notify(0, "WATCHDOG=1");
    const int signal_number = sigtimedwait(&signals, nullptr, &interval);
    if (signal_number > 0) return signal_number;
  }
}

}  // namespace cclo::daemon
