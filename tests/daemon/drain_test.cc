// The drain's admissions: a Submit admitted before a drain began holds the drain back
// until its op is registered; one that asks after it began is refused.
#include "daemon/drain.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"

namespace cclo::daemon {
namespace {

TEST(DrainTest, ADrainWaitsForTheSubmitsAdmittedBeforeItBegan) {
  SessionRegistry sessions;
  RootGather gather(absl::Minutes(1));
  PolicyStore policies{cclo::v1::Policy()};
  Communicators communicators(nullptr, nullptr, &gather, &policies, "127.0.0.1:1");
  absl::Notification stopped;
  Drain drain(&sessions, &communicators, &gather, [&] { stopped.Notify(); });

  absl::StatusOr<Drain::Admission> admitted = drain.Enter("new ops");
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  std::thread draining([&] { EXPECT_TRUE(drain.Run(absl::Seconds(10)).ok()); });
  while (!drain.draining()) absl::SleepFor(absl::Milliseconds(1));
  absl::StatusOr<Drain::Admission> late = drain.Enter("new ops");
  EXPECT_EQ(late.status(), absl::UnavailableError("cclod is draining: new ops refused"));
  // The admitted Submit has not registered its op yet: the drain must not look for ops,
  // let alone stop, before it has.
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  { Drain::Admission released = *std::move(admitted); }
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(30)));
  draining.join();
}

}  // namespace
}  // namespace cclo::daemon
