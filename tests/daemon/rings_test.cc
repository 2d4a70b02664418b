// Rings as the engine's poller (hw/poller.h): Sleeping() asks to be polled again at once
// while a session's ring has work that no doorbell will announce.
#include "daemon/rings.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <memory>
#include <vector>

#include "hw/clock.h"

namespace cclo::daemon {
namespace {

TEST(RingsTest, CompletionsConsumedWhileTheEngineWasAwakeAreLookedAtBeforeItSleeps) {
  absl::StatusOr<std::unique_ptr<Rings>> rings = Rings::Create(nullptr);
  ASSERT_TRUE(rings.ok()) << rings.status();
  auto session = std::make_shared<Session>(1, "token", PeerCredentials{}, -1, nullptr, Lease{});
  absl::StatusOr<std::vector<int>> fds = (*rings)->Open(session);
  ASSERT_TRUE(fds.ok()) << fds.status();
  // The client's view of the rings (the fds stay the rings').
  void* base = mmap(nullptr, ring::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds->at(0), 0);
  ASSERT_NE(base, MAP_FAILED);
  ring::RingHeader* header = ring::Header(base);

  EXPECT_FALSE((*rings)->Poll());  // takes the new ring in; nothing to do
  EXPECT_EQ((*rings)->Sleeping(), hw::SteadyTime::InfiniteFuture());
  (*rings)->Awake();
  // The client consumes while the engine is awake, so it does not ring. (No completion
  // was posted here; what the moved tail releases does not matter to the engine's sleep.)
  header->completion_tail.store(1, std::memory_order_release);
  EXPECT_EQ((*rings)->Sleeping(), hw::SteadyTime::InfinitePast())
      << "the engine would sleep with the client's consumed results unreleased";
  (*rings)->Awake();
  EXPECT_FALSE((*rings)->Poll());  // takes note of the tail
  EXPECT_EQ((*rings)->Sleeping(), hw::SteadyTime::InfiniteFuture());
  (*rings)->Awake();
  munmap(base, ring::kRingBytes);
}

}  // namespace
}  // namespace cclo::daemon
