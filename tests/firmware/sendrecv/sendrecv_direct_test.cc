#include "firmware/sendrecv/sendrecv_direct.h"

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

TEST(SendRecvDirectTest, OneMessageEvenWhenEmpty) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kSend;
  call.rank = 0;
  call.peer = 2;
  call.tag = 11;
  call.count = 0;
  absl::StatusOr<hw::Program> send = GenerateSendDirect(call, 3);
  ASSERT_TRUE(send.ok()) << send.status();
  ASSERT_EQ(send->moves.size(), 1u);
  EXPECT_EQ(send->moves[0].op0, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(send->moves[0].result, hw::Endpoint::Network(2, 11));

  call.collective = hw::Collective::kRecv;
  call.rank = 2;
  call.peer = 0;
  call.count = 5;
  absl::StatusOr<hw::Program> recv = GenerateRecvDirect(call, 3);
  ASSERT_TRUE(recv.ok()) << recv.status();
  ASSERT_EQ(recv->moves.size(), 1u);
  EXPECT_EQ(recv->moves[0].op0, hw::Endpoint::Network(0, 11));
  EXPECT_EQ(recv->moves[0].result, hw::Endpoint::Memory(hw::Slot::kResult, 0));
  EXPECT_EQ(recv->moves[0].count, 5u);
}

}  // namespace
}  // namespace cclo::firmware
