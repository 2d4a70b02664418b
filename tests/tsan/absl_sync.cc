// ThreadSanitizer sees no ordering made by Debian's absl::Mutex, CondVar and Notification:
// libabsl_synchronization is not instrumented, and its own TSan annotations are compiled
// out. --config=tsan links this into every binary (.bazelrc), where its definitions take
// the place of the library's calls that lock and unlock (the library's own included, as it
// calls them through its PLT), tell TSan what they do, and call the library's.
//
// TSan ignores a thread's accesses between the pre and post annotations, which covers the
// Conditions that absl evaluates inside a call, some of them for another thread. The calls
// with a timeout are the library's calls with a deadline, through the PLT.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

// The library's definition of `symbol` (a mangled name of Debian 12's absl), or an abort.
template <typename Function>
Function Next(const char* symbol) {
  void* const next = dlsym(RTLD_NEXT, symbol);
  if (next == nullptr) {
    std::fprintf(stderr, "tsan absl_sync: no %s after this binary: %s\n", symbol, dlerror());
    std::abort();
  }
  return reinterpret_cast<Function>(next);
}

#define CCLO_ABSL_NEXT(type, symbol) static const auto next = Next<type>(symbol)

// A call that releases `mu` and holds it again when it returns.
template <typename Call>
auto Reacquiring(absl::Mutex* mu, Call call) {
  __tsan_mutex_pre_unlock(mu, 0);
  auto result = call();
  __tsan_mutex_post_unlock(mu, 0);
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
  return result;
}

// A call that returns holding `mu`.
template <typename Call>
auto Acquiring(absl::Mutex* mu, Call call) {
  __tsan_mutex_pre_lock(mu, 0);
  auto result = call();
  __tsan_mutex_post_lock(mu, 0, 0);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  CCLO_ABSL_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  Acquiring(this, [&] { return (next(this), 0); });
}

bool Mutex::TryLock() {
  CCLO_ABSL_NEXT(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = next(this);
  __tsan_mutex_post_lock(
      this, locked ? __tsan_mutex_try_lock : __tsan_mutex_try_lock | __tsan_mutex_try_lock_failed,
      0);
  return locked;
}

void Mutex::Unlock() {
  CCLO_ABSL_NEXT(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  next(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::LockWhen(const Condition& cond) {
  CCLO_ABSL_NEXT(void (*)(Mutex*, const Condition&),
                 "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  Acquiring(this, [&] { return (next(this, cond), 0); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  CCLO_ABSL_NEXT(bool (*)(Mutex*, const Condition&, Time),
                 "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquiring(this, [&] { return next(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  CCLO_ABSL_NEXT(void (*)(Mutex*, const Condition&),
                 "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  Reacquiring(this, [&] { return (next(this, cond), 0); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  CCLO_ABSL_NEXT(bool (*)(Mutex*, const Condition&, Time),
                 "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Reacquiring(this, [&] { return next(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  CCLO_ABSL_NEXT(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  Reacquiring(mu, [&] { return (next(this, mu), 0); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  CCLO_ABSL_NEXT(bool (*)(CondVar*, Mutex*, Time),
                 "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return Reacquiring(mu, [&] { return next(this, mu, deadline); });
}

// HasBeenNotified() is an acquire load in the caller's (instrumented) code: the release is
// made before the library's store that the load can see.
void Notification::Notify() {
  CCLO_ABSL_NEXT(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  __tsan_release(const_cast<std::atomic<bool>*>(&notified_yet_));
  next(this);
}

ABSL_NAMESPACE_END
}  // namespace absl
