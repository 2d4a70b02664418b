#include "hw/emu/scheduler.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cclo::hw::emu {
namespace {

constexpr uint64_t kQuantum = 1000;

/// A scheduler whose units record their tenant, in the order they run.
class SchedulerTest : public ::testing::Test {
 protected:
  void Queue(uint32_t tenant, int units, uint64_t bytes = kQuantum) {
    for (int i = 0; i < units; ++i) {
      scheduler_.Push(tenant, bytes, [this, tenant] { served_.push_back(tenant); });
    }
  }
  /// Runs every unit, one engine turn of one unit at a time.
  void Drain() {
    while (scheduler_.Run(1)) {
    }
  }
  std::string Order() const {
    std::string order;
    for (uint32_t tenant : served_) order += static_cast<char>('0' + tenant);
    return order;
  }

  Scheduler scheduler_{kQuantum};
  std::vector<uint32_t> served_;
};

TEST_F(SchedulerTest, EqualWeightsAlternate) {
  Queue(1, 3);
  Queue(2, 3);
  Drain();
  EXPECT_EQ(Order(), "121212");
}

TEST_F(SchedulerTest, AQuantumTakesUnitsUpToItsSize) {
  Queue(1, 4, kQuantum / 2);
  Queue(2, 4, kQuantum / 2);
  Drain();
  EXPECT_EQ(Order(), "11221122");
}

TEST_F(SchedulerTest, SmallerQuantumAlternatesSooner) {
  scheduler_.SetQuantum(kQuantum / 2);
  Queue(1, 4, kQuantum / 2);
  Queue(2, 4, kQuantum / 2);
  Drain();
  EXPECT_EQ(Order(), "12121212");
}

TEST_F(SchedulerTest, WeightsOneAndThreeShareOneToThree) {
  scheduler_.Configure({.fair = true, .weights = {{2, 3}}});
  Queue(1, 4);
  Queue(2, 12);
  Drain();
  EXPECT_EQ(Order(), "1222" "1222" "1222" "1222");
}

TEST_F(SchedulerTest, LoneTenantGetsEverything) {
  scheduler_.Configure({.fair = true, .weights = {{1, 1}, {2, 100}}});
  Queue(1, 5);
  EXPECT_FALSE(scheduler_.Run(5 * kQuantum));
  EXPECT_EQ(Order(), "11111");
}

TEST_F(SchedulerTest, SmallUnitWaitsBehindOneTurnOfABigBacklog) {
  Queue(1, 32);  // a tenant streaming a big message, segment by segment
  scheduler_.Run(3 * kQuantum);
  Queue(2, 1, 1024 / 8);  // another tenant's small message arrives
  Drain();
  // Tenant 1 spent its turn's quantum: the small unit goes next.
  EXPECT_EQ(Order(), "111" "2" + std::string(29, '1'));
}

TEST_F(SchedulerTest, FifoServesInQueueOrder) {
  scheduler_.Configure({.fair = false, .weights = {}});
  Queue(1, 32);
  scheduler_.Run(3 * kQuantum);
  Queue(2, 1, 1024 / 8);
  Drain();
  EXPECT_EQ(Order(), std::string(32, '1') + "2");
}

TEST_F(SchedulerTest, UnitLargerThanAQuantumWaitsForDeficit) {
  Queue(1, 2, 3 * kQuantum);
  Queue(2, 6);
  Drain();
  // Tenant 1 saves a quantum per round and runs once it has three.
  EXPECT_EQ(Order(), "22" "1" "222" "1" "2");
}

TEST_F(SchedulerTest, TenantThatEmptiesForgetsItsDeficit) {
  Queue(1, 1, kQuantum / 2);  // leaves half a quantum unused, then goes idle
  Queue(2, 2);
  Drain();
  Queue(1, 2, kQuantum * 3 / 4);  // with half a quantum left over, both would fit a turn
  Queue(2, 2);
  Drain();
  EXPECT_EQ(Order(), "122" "1212");
}

TEST_F(SchedulerTest, UnitsQueuedWhileRunningJoinTheRound) {
  scheduler_.Push(1, kQuantum, [this] {
    served_.push_back(1);
    Queue(1, 1);
    Queue(2, 1);
  });
  Queue(2, 1);
  Drain();
  EXPECT_EQ(Order(), "1212");
}

TEST_F(SchedulerTest, WeightsChangeAtRunTime) {
  Queue(1, 8);
  Queue(2, 8);
  scheduler_.Run(4 * kQuantum);  // equal weights: 1212
  scheduler_.Configure({.fair = true, .weights = {{1, 3}, {2, 0}}});  // 0 counts as 1
  Drain();
  EXPECT_EQ(Order(), "1212" "1112" "1112" "2222");
}

TEST_F(SchedulerTest, SwitchingToFifoKeepsEveryUnit) {
  Queue(1, 2);
  Queue(2, 2);
  scheduler_.Run(1);
  scheduler_.Configure({.fair = false, .weights = {}});
  Drain();
  EXPECT_EQ(Order(), "1122");
  EXPECT_TRUE(scheduler_.empty());
}

}  // namespace
}  // namespace cclo::hw::emu
