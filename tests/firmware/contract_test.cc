#include "firmware/contract.h"

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Collective;
using hw::Slot;

TEST(ContractTest, ElementsPerSlot) {
  for (uint32_t world_size : {1u, 4u, 13u}) {
    EXPECT_EQ(RequiredElements(Collective::kSend, Slot::kOp0, 9, world_size), 9u);
    EXPECT_EQ(RequiredElements(Collective::kSend, Slot::kOp1, 9, world_size), 0u);
    EXPECT_EQ(RequiredElements(Collective::kSend, Slot::kResult, 9, world_size), 0u);
    EXPECT_EQ(RequiredElements(Collective::kRecv, Slot::kOp0, 9, world_size), 0u);
    EXPECT_EQ(RequiredElements(Collective::kRecv, Slot::kResult, 9, world_size), 9u);
    EXPECT_EQ(RequiredElements(Collective::kBcast, Slot::kOp0, 9, world_size), 0u);
    EXPECT_EQ(RequiredElements(Collective::kBcast, Slot::kResult, 9, world_size), 9u);
    EXPECT_EQ(RequiredElements(Collective::kAllreduce, Slot::kOp0, 9, world_size), 9u);
    EXPECT_EQ(RequiredElements(Collective::kAllreduce, Slot::kOp1, 9, world_size), 0u);
    EXPECT_EQ(RequiredElements(Collective::kAllreduce, Slot::kResult, 9, world_size), 9u);
    for (Slot slot : {Slot::kOp0, Slot::kOp1, Slot::kResult}) {
      EXPECT_EQ(RequiredElements(Collective::kNop, slot, 9, world_size), 0u);
      EXPECT_EQ(RequiredElements(static_cast<Collective>(200), slot, 9, world_size), 0u);
    }
  }
  EXPECT_EQ(RequiredElements(Collective::kAllreduce, Slot::kResult, 0, 3), 0u);
}

}  // namespace
}  // namespace cclo::firmware
