// cclo-run's Execute against a real cclod: an op leaves nothing of itself behind when it
// returns, also when the daemon refuses part of it.
#include "client/run/execute.h"
#include "gtest/gtest.h"
#include "tests/client/sessions.h"
#include "tests/e2e/cluster.h"

namespace cclo::run {
namespace {

// With room for one op in flight, a sendrecv's receive takes it and its send is refused.
// The receive has ended (here at its deadline, as rank 1 sends nothing) by the time
// Execute returns the refusal, so the room is free again.
TEST(RunExecuteTest, ASendRecvWhoseSendIsRefusedEndsItsReceiveFirst) {
  testing::Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 1}\n");
  testing::Pair pair = testing::JoinPair(daemon.runtime_dir());
  std::unique_ptr<Communicator> alone = testing::JoinAlone(*pair.clients[1]);
  absl::StatusOr<Buffer> send = pair.clients[0]->AllocBuffer(64);
  absl::StatusOr<Buffer> recv = pair.clients[0]->AllocBuffer(64);
  ASSERT_TRUE(send.ok() && recv.ok()) << send.status() << recv.status();
  OpShape shape;
  shape.op = Op::kSendRecv;
  shape.size = 2;
  shape.count = 16;
  OpOptions options;
  options.timeout = absl::Seconds(1);
  const absl::Status status = Execute(*pair.comms[0], shape, options, *send, *recv);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  const absl::Status nop = alone->Nop();
  EXPECT_TRUE(nop.ok()) << nop;
}

}  // namespace
}  // namespace cclo::run
