// The waiting_calls quota: each client RPC that may wait (Wait with a timeout, Submit with
// wait_for_room, JoinCommunicator) holds one of the daemon's threads, so a tenant may have
// at most that many at once. One more is refused at once, naming the quota; the waiting
// ones go on, and calls that cannot wait are not counted.
#include <thread>
#include <vector>

#include "cclo/v1/admin.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/pairs.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

constexpr char kRefusal[] = "tenant 'default' quota waiting_calls: limit 2, in use 2, asked for 1";

/// What `ccloctl tenants` says the default tenant holds of its waiting_calls quota.
uint64_t WaitingCalls(const Daemon& daemon) {
  const auto tenants = AdminJson<v1::ListTenantsResponse>(daemon, {"tenants"});
  for (const v1::QuotaUse& quota : tenants.tenants(0).quotas()) {
    if (quota.name() == "waiting_calls") return quota.used();
  }
  ADD_FAILURE() << "no waiting_calls quota in " << tenants.DebugString();
  return ~0ull;
}

void ExpectRefused(const grpc::Status& status) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find(kRefusal), std::string::npos) << status.error_message();
}

TEST(WaitingCallsTest, ACallOverTheQuotaIsRefusedAndTheWaitingOnesGoOn) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {waiting_calls: 2}\n");
  RawSession session(daemon.runtime_dir());
  uint64_t handle = 0;
  ASSERT_TRUE(session.Join(session.NewToken(), 0, 1, &handle).ok());
  const uint64_t buffer = session.Alloc(1 << 16);
  // A receive that no send meets holds the two ops that wait for it.
  const uint64_t held = Submit(session, RecvRequest(handle, buffer, 0));
  std::vector<uint64_t> behind;
  for (uint64_t offset : {4096, 8192}) {
    v1::SubmitRequest request = RecvRequest(handle, buffer, 0);
    request.mutable_recv()->set_offset(offset);
    request.add_after(held);
    behind.push_back(Submit(session, request));
  }
  std::vector<grpc::Status> waited(behind.size());
  std::vector<v1::WaitResponse> results(behind.size());
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < behind.size(); ++i) {
    waiters.emplace_back([&, i] {
      v1::WaitRequest wait;
      wait.set_op_id(behind[i]);
      wait.set_timeout_ms(30'000);
      waited[i] = session.stub().Wait(session.Context().get(), wait, &results[i]);
    });
  }
  EXPECT_TRUE(WaitUntil([&] { return WaitingCalls(daemon) == 2; }, absl::Seconds(20)));

  v1::WaitRequest wait;
  wait.set_op_id(held);
  wait.set_timeout_ms(10);
  v1::WaitResponse response;
  ExpectRefused(session.stub().Wait(session.Context().get(), wait, &response));
  v1::SubmitRequest room = RecvRequest(handle, buffer, 0);
  room.set_wait_for_room(true);
  v1::SubmitResponse submitted;
  ExpectRefused(session.stub().Submit(session.Context().get(), room, &submitted));
  ExpectRefused(session.Join(session.NewToken(), 0, 1));
  // Calls that cannot wait go on.
  wait.set_timeout_ms(0);
  grpc::Status polled = session.stub().Wait(session.Context().get(), wait, &response);
  ASSERT_TRUE(polled.ok()) << polled.error_message();
  EXPECT_FALSE(response.done());

  for (uint64_t op : behind) {
    v1::CancelRequest cancel;
    cancel.set_op_id(op);
    v1::CancelResponse cancelled;
    ASSERT_TRUE(session.stub().Cancel(session.Context().get(), cancel, &cancelled).ok());
  }
  for (std::thread& waiter : waiters) waiter.join();
  for (size_t i = 0; i < behind.size(); ++i) {
    ASSERT_TRUE(waited[i].ok()) << waited[i].error_message();
    EXPECT_TRUE(results[i].done());
    EXPECT_EQ(results[i].code(), static_cast<int32_t>(grpc::StatusCode::CANCELLED));
  }
  EXPECT_EQ(WaitingCalls(daemon), 0u);
  wait.set_timeout_ms(10);
  grpc::Status again = session.stub().Wait(session.Context().get(), wait, &response);
  ASSERT_TRUE(again.ok()) << again.error_message();
  EXPECT_FALSE(response.done());
}

}  // namespace
}  // namespace cclo::testing
