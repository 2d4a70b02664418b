// While two tenants have calls on an engine with fair scheduling, its turns are a quarter
// as long (DeviceStats::turn_bytes), and full again once one tenant is done; with FIFO
// they stay full.
#include <future>
#include <vector>

#include "gtest/gtest.h"
#include "hw/poe/engine.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {
namespace {

constexpr uint64_t kCount = 16;

class TurnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = MakeDevices(2);
    ASSERT_EQ(devices_.size(), 2u);
    for (uint8_t seed : {60, 61, 62}) {  // tenant 0's, tenant 1's, and one for nops
      comms_.push_back(MakeComm({devices_[0].get(), devices_[1].get()}, seed));
      ASSERT_TRUE(ConfigureAll(comms_.back()).ok());
    }
  }

  /// Rank 0 of tenant `tenant`'s communicator posts a receive from rank 1.
  std::future<Completion> Receive(uint32_t tenant) {
    CallDescriptor recv = Describe(comms_[tenant], Collective::kRecv, 0, kCount);
    recv.peer = 1;
    recv.tenant = tenant;
    buffers_[tenant][0].slots[2].resize(kCount * sizeof(float));
    return Submit(*devices_[0], recv, buffers_[tenant][0].Views());
  }

  /// Rank 1 of tenant `tenant`'s communicator sends to rank 0; waits for both ends.
  void Send(uint32_t tenant, std::future<Completion>& receive) {
    CallDescriptor send = Describe(comms_[tenant], Collective::kSend, 1, kCount);
    send.peer = 0;
    send.tenant = tenant;
    buffers_[tenant][1].slots[0].assign(kCount * sizeof(float), std::byte{7});
    std::future<Completion> sent = Submit(*devices_[1], send, buffers_[tenant][1].Views());
    EXPECT_TRUE(Wait(sent).status.ok());
    EXPECT_TRUE(Wait(receive).status.ok());
  }

  /// Device 0's turn bytes once a whole turn ran after everything submitted before: two
  /// nops (tenant 0's) in a row, the second posted after the first's turn.
  uint64_t SettledTurnBytes() {
    RankBuffers none;
    for (int i = 0; i < 2; ++i) {
      std::future<Completion> nop =
          Submit(*devices_[0], Describe(comms_[2], Collective::kNop, 0, 0), none.Views());
      EXPECT_TRUE(Wait(nop).status.ok());
    }
    return devices_[0]->Stats().turn_bytes;
  }

  std::vector<DevicePtr> devices_;
  std::vector<TestComm> comms_;
  RankBuffers buffers_[2][2];
};

TEST_F(TurnsTest, FairSchedulingShortensTurnsWhileTenantsShare) {
  std::future<Completion> first = Receive(0);
  EXPECT_EQ(SettledTurnBytes(), poe::kTurnBytes);  // tenant 0 alone
  std::future<Completion> second = Receive(1);
  EXPECT_EQ(SettledTurnBytes(), poe::kTurnBytes / 4);
  Send(0, first);
  Send(1, second);

  // Full turns again some 10 ms after the calls finished, with no work to wake the engine.
  const absl::Time deadline = absl::Now() + kWait;
  while (devices_[0]->Stats().turn_bytes != poe::kTurnBytes && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(devices_[0]->Stats().turn_bytes, poe::kTurnBytes);
}

TEST_F(TurnsTest, FifoKeepsFullTurns) {
  devices_[0]->SetScheduling({.fair = false});
  std::future<Completion> first = Receive(0);
  std::future<Completion> second = Receive(1);
  EXPECT_EQ(SettledTurnBytes(), poe::kTurnBytes);
  Send(0, first);
  Send(1, second);
}

}  // namespace
}  // namespace cclo::hw::emu::testing
