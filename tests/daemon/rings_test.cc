// Rings as the engine's poller (hw/poller.h): Sleeping() asks to be polled again at once
// while a session's ring has work that no doorbell will announce. A session's ring against
// a client that writes anything into the shared memory.
#include "daemon/rings.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>

#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hw/clock.h"
#include "tests/fuzz/mutator.h"

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

// The daemon rings the client on the engine's thread: however the client holds its end of
// the completion doorbell (made blocking, written to as an eventfd's counter could be filled,
// never read), the ring never waits, and the doorbell stays readable.
TEST(SessionRingTest, RingingAClientThatNeverReadsNeverWaits) {
  absl::StatusOr<std::unique_ptr<SessionRing>> created = SessionRing::Create();
  ASSERT_TRUE(created.ok()) << created.status();
  SessionRing& ring = **created;
  void* base =
      mmap(nullptr, ring::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring.ClientFds()[0], 0);
  ASSERT_NE(base, MAP_FAILED);
  ring::Header(base)->client_waiters.store(1, std::memory_order_seq_cst);
  const int doorbell = ring.ClientFds()[2];
  ASSERT_EQ(fcntl(doorbell, F_SETFL, fcntl(doorbell, F_GETFL) & ~O_NONBLOCK), 0);
  const uint64_t most = UINT64_MAX - 1;
  (void)!write(doorbell, &most, sizeof(most));
  for (int rings = 0; rings < 100'000; ++rings) ring.WakeClient();  // more than a pipe holds
  pollfd readable{doorbell, POLLIN, 0};
  EXPECT_EQ(poll(&readable, 1, 0), 1);
  munmap(base, ring::kRingBytes);
}

// The client owns the command head and the completion tail, and may write anything there:
// the daemon takes a command only below a head within the ring's bounds (a head outside
// them is INVALID_ARGUMENT naming it), copies it out whole, and posts a completion only
// where a tail within bounds says the client has consumed the slot.
TEST(SessionRingTest, ScribbledIndicesAreRefusedByNameNeverFollowed) {
  absl::StatusOr<std::unique_ptr<SessionRing>> created = SessionRing::Create();
  ASSERT_TRUE(created.ok()) << created.status();
  SessionRing& ring = **created;
  void* base =
      mmap(nullptr, ring::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring.ClientFds()[0], 0);
  ASSERT_NE(base, MAP_FAILED);
  ring::RingHeader* header = ring::Header(base);
  ring::CommandSlot* commands = ring::Commands(base);
  ring::CompletionSlot* completions = ring::Completions(base);
  testing::Mutator random(9);
  // An index near `from` (either side, up to `room` + 2 ahead), or anywhere.
  auto near = [&random](uint64_t from, uint64_t room) {
    switch (random.Below(4)) {
      case 0:
        return random.Any();
      case 1:
        return from - 1 - random.Below(3);  // behind it (wrapping below 0)
      default:
        return from + random.Below(room + 3);
    }
  };
  uint64_t taken = 0;                     // commands the daemon took
  uint64_t completed = 0;                 // completions it posted
  std::map<uint64_t, uint64_t> finished;  // op id -> ring index, of OK ops
  std::set<uint64_t> released, tails;
  int refused = 0;
  constexpr int kRounds = 20000;
  for (uint64_t round = 1; round <= kRounds; ++round) {
    // The client writes a slot, any value into the shared tail the daemon owns, and a head.
    random.Fill(&commands[random.Below(ring::kCommandSlots)], sizeof(ring::CommandSlot));
    if (random.OneIn(4)) header->command_tail.store(random.Any());
    const uint64_t head = near(taken, ring::kCommandSlots);
    header->command_head.store(head);
    ring::CommandSlot expected;
    std::memcpy(&expected, &commands[taken % ring::kCommandSlots], sizeof(expected));
    absl::StatusOr<std::optional<ring::CommandSlot>> command = ring.TakeCommand();
    if (head < taken || head - taken > ring::kCommandSlots) {
      ASSERT_FALSE(command.ok()) << "head " << head << ", tail " << taken;
      EXPECT_EQ(command.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(command.status().message(),
                absl::StrCat("command ring head ", head, " is outside [", taken, ", ", taken, " + ",
                             ring::kCommandSlots, "]"));
      ++refused;
    } else {
      ASSERT_TRUE(command.ok()) << command.status();
      ASSERT_EQ(command->has_value(), head != taken);
      if (command->has_value()) {
        EXPECT_EQ(std::memcmp(&**command, &expected, sizeof(expected)), 0);
        EXPECT_EQ(header->command_tail.load(), ++taken);
      }
    }
    // The client moves its completion tail anywhere; the daemon posts an ACCEPTED, or an
    // op's FINISHED.
    const uint64_t tail = near(completed - ring::kCompletionSlots, ring::kCompletionSlots);
    header->completion_tail.store(tail);
    tails.insert(tail);
    ring::CompletionSlot slot{};
    slot.cookie = round;
    slot.op_id = round;
    slot.kind = static_cast<uint32_t>(random.OneIn(2) ? ring::CompletionKind::kFinished
                                                      : ring::CompletionKind::kAccepted);
    slot.code = random.OneIn(4) ? 2 : 0;
    const bool room = tail <= completed && completed - tail < ring::kCompletionSlots;
    ASSERT_EQ(ring.PostQuietly(slot), room) << "tail " << tail << ", head " << completed;
    if (!room) {
      // Kept, and posted once the client consumed everything.
      EXPECT_TRUE(ring.Overflowing());
      EXPECT_EQ(header->completions_held.load(), 1u);
      header->completion_tail.store(completed);
      tails.insert(completed);
      EXPECT_TRUE(ring.FlushOverflow());
      EXPECT_FALSE(ring.Overflowing());
    }
    // What a client reads to tell a result still coming from one never reported.
    EXPECT_EQ(header->completions_held.load(), 0u);
    EXPECT_EQ(std::memcmp(&completions[completed % ring::kCompletionSlots], &slot, sizeof(slot)),
              0);
    if (slot.kind == static_cast<uint32_t>(ring::CompletionKind::kFinished) && slot.code == 0) {
      finished[slot.op_id] = completed;
    }
    EXPECT_EQ(header->completion_head.load(), ++completed);
    // Only OK ops that finished are released, each once, and only below a tail the client
    // wrote that is not ahead of the completions posted (a scribbled one releases nothing).
    const auto above = tails.upper_bound(completed);
    const uint64_t consumed = above == tails.begin() ? 0 : *std::prev(above);
    for (uint64_t op_id : ring.TakeConsumed()) {
      ASSERT_TRUE(finished.contains(op_id)) << op_id;
      EXPECT_LT(finished[op_id], consumed) << op_id;
      EXPECT_TRUE(released.insert(op_id).second) << op_id;
    }
  }
  // Each way of ending a round came often enough to say something.
  EXPECT_GT(refused, kRounds / 10);
  EXPECT_GT(taken, static_cast<uint64_t>(kRounds / 10));
  EXPECT_GT(released.size(), 0u);
  munmap(base, ring::kRingBytes);
}

}  // namespace
}  // namespace cclo::daemon
