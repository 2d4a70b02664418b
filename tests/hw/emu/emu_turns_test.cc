// While two tenants queue engine work on an engine with fair scheduling, its turns are
// short (kSharedTurnBytes, DeviceStats::turn_bytes), and full again some 50 ms after one
// of them stops. A tenant alone, a tenant beside one that only waits, and FIFO keep full
// turns.
#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hw/emu/emu_device.h"
#include "hw/poe/engine.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {
namespace {

constexpr uint64_t kCount = 64 << 10;  // floats (256 KiB) per message
constexpr int kOps = 100;              // messages a stream sends when it is counted

class TurnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = MakeDevices(2);
    ASSERT_EQ(devices_.size(), 2u);
    for (uint8_t seed : {60, 61}) {  // tenant 0's and tenant 1's
      comms_.push_back(MakeComm({devices_[0].get(), devices_[1].get()}, seed));
      ASSERT_TRUE(ConfigureAll(comms_.back()).ok());
    }
  }

  /// Tenant `tenant` sends messages from rank 0 to rank 1, `ops` of them or, with ops 0,
  /// until `stop`; after each, device 0's turn bytes go into `seen`.
  void Stream(uint32_t tenant, int ops, const std::atomic<bool>& stop,
              std::vector<uint64_t>& seen) {
    RankBuffers from, to;
    from.slots[0].assign(kCount * sizeof(float), std::byte{1});
    to.slots[2].resize(kCount * sizeof(float));
    for (int i = 0; ops == 0 ? !stop.load() : i < ops; ++i) {
      CallDescriptor send = Describe(comms_[tenant], Collective::kSend, 0, kCount);
      send.peer = 1;
      send.tenant = tenant;
      CallDescriptor recv = Describe(comms_[tenant], Collective::kRecv, 1, kCount);
      recv.peer = 0;
      recv.tenant = tenant;
      std::future<Completion> received = Submit(*devices_[1], recv, to.Views());
      std::future<Completion> sent = Submit(*devices_[0], send, from.Views());
      ASSERT_TRUE(Wait(sent).status.ok());
      ASSERT_TRUE(Wait(received).status.ok());
      seen.push_back(devices_[0]->Stats().turn_bytes);
    }
  }

  /// Tenants 0 and 1 stream `ops` messages each at once; their turn bytes seen.
  std::vector<uint64_t> StreamBoth(int ops) {
    std::atomic<bool> stop{false};
    std::vector<uint64_t> seen[2];
    std::thread other([&] { Stream(1, ops, stop, seen[1]); });
    Stream(0, ops, stop, seen[0]);
    other.join();
    seen[0].insert(seen[0].end(), seen[1].begin(), seen[1].end());
    return seen[0];
  }

  uint64_t TurnBytes() const { return devices_[0]->Stats().turn_bytes; }

  std::vector<DevicePtr> devices_;
  std::vector<TestComm> comms_;
};

/// Every entry of `seen` is full turns.
void ExpectFull(const std::vector<uint64_t>& seen) {
  ASSERT_FALSE(seen.empty());
  for (uint64_t bytes : seen) ASSERT_EQ(bytes, poe::kTurnBytes);
}

TEST_F(TurnsTest, ALoneTenantKeepsFullTurns) {
  std::atomic<bool> stop{false};
  std::vector<uint64_t> seen;
  Stream(0, kOps, stop, seen);
  ExpectFull(seen);
}

TEST_F(TurnsTest, ATenantThatOnlyWaitsDoesNotShortenTurns) {
  RankBuffers waiting;
  waiting.slots[2].resize(sizeof(float));
  CallDescriptor recv = Describe(comms_[1], Collective::kRecv, 0, 1);
  recv.peer = 1;
  recv.tenant = 1;
  std::future<Completion> pending = Submit(*devices_[0], recv, waiting.Views());
  std::atomic<bool> stop{false};
  std::vector<uint64_t> seen;
  Stream(0, kOps, stop, seen);
  ExpectFull(seen);
  EXPECT_EQ(pending.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  devices_[0]->RemoveCommunicator(comms_[1].config.id, absl::CancelledError("done"));
  EXPECT_EQ(Wait(pending).status.code(), absl::StatusCode::kCancelled);
}

TEST_F(TurnsTest, TwoStreamingTenantsShortenTurnsUntilOneStops) {
  std::atomic<bool> stop{false};
  std::vector<uint64_t> seen[2];
  std::thread first([&] { Stream(0, 0, stop, seen[0]); });
  std::thread second([&] { Stream(1, 0, stop, seen[1]); });
  const absl::Time deadline = absl::Now() + kWait;
  while (TurnBytes() != kSharedTurnBytes && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(TurnBytes(), kSharedTurnBytes);
  stop = true;
  first.join();
  second.join();

  // Full again some 50 ms later, with no work to wake the engine.
  while (TurnBytes() != poe::kTurnBytes && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(TurnBytes(), poe::kTurnBytes);
}

TEST_F(TurnsTest, FifoKeepsFullTurns) {
  devices_[0]->SetScheduling({.fair = false});
  ExpectFull(StreamBoth(kOps));
}

}  // namespace
}  // namespace cclo::hw::emu::testing
