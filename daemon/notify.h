// systemd service notification over $NOTIFY_SOCKET (sd_notify): readiness, reloads,
// shutdown and watchdog keep-alives for a Type=notify unit. Outside systemd every call
// sends nothing.
#pragma once

#include <signal.h>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"

namespace cclo::daemon {

/// Tells systemd the daemon serves (READY=1), at start and after a reload.
void NotifyReady();

/// Tells systemd the daemon reloads its config (RELOADING=1); NotifyReady() follows.
void NotifyReloading();

/// Tells systemd the daemon is shutting down (STOPPING=1).
void NotifyStopping();

/// Tells systemd's watchdog the daemon lives (WATCHDOG=1).
void NotifyWatchdog();

/// How many times FeedingWatchdog sends WATCHDOG=1 at most: for 4 × WatchdogSec (2 min
/// under the shipped unit), so that systemd still ends a reload stuck for good (a group or
/// file lookup that hangs), as it did when the reload ran on the thread that feeds it.
inline constexpr int kReloadPings = 8;

/// Runs `work` on a thread of its own while this thread sends WATCHDOG=1 at once and then
/// every `watchdog_ping` until it ends, at most kReloadPings times, logging a warning if it
/// stops before the work ends: a reload's name lookups take as long as the resolver does,
/// which may be longer than WatchdogSec. With the watchdog off (zero), or where no thread
/// can start, runs it here. Signals wait meanwhile, a stop too.
void FeedingWatchdog(absl::Duration watchdog_ping, absl::FunctionRef<void()> work);

/// Half the interval of systemd's watchdog (WatchdogSec=, seen as $WATCHDOG_USEC), or
/// zero when the watchdog is off.
absl::Duration WatchdogPingInterval();

/// Waits for one of `signals` (blocked in every thread) and returns it with its sender,
/// sending WATCHDOG=1 at once and then every `watchdog_ping` meanwhile (never when it is
/// zero).
siginfo_t WaitForSignal(const sigset_t& signals, absl::Duration watchdog_ping);

}  // namespace cclo::daemon
