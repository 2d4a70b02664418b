#include "tests/e2e/pairs.h"

#include <thread>

namespace cclo::testing {

std::pair<uint64_t, uint64_t> JoinPair(RawSession& a, RawSession& b) {
  const std::string token = a.NewToken();
  uint64_t handle_b = 0;
  std::thread join_b([&] { EXPECT_TRUE(b.Join(token, 1, 2, &handle_b).ok()); });
  uint64_t handle_a = 0;
  grpc::Status joined = a.Join(token, 0, 2, &handle_a);
  join_b.join();
  EXPECT_TRUE(joined.ok()) << joined.error_message();
  return {handle_a, handle_b};
}

void ExpectPairAllreduce(RawSession& a, uint64_t handle_a, RawSession& b, uint64_t handle_b) {
  const uint64_t buffer_a = a.Alloc(4096), buffer_b = b.Alloc(4096);
  grpc::Status other;
  std::thread peer([&] { other = b.Run(AllreduceRequest(handle_b, buffer_b, 1024)); });
  grpc::Status mine = a.Run(AllreduceRequest(handle_a, buffer_a, 1024));
  peer.join();
  EXPECT_TRUE(mine.ok()) << mine.error_message();
  EXPECT_TRUE(other.ok()) << other.error_message();
}

cclo::v1::SubmitRequest RecvRequest(uint64_t handle, uint64_t buffer, uint32_t from) {
  cclo::v1::SubmitRequest request;
  request.set_comm_handle(handle);
  request.set_collective(cclo::v1::RECV);
  request.set_datatype(cclo::v1::FLOAT32);
  request.set_count(256);
  request.set_peer(from);
  request.set_tag(7);
  request.mutable_recv()->set_buffer_id(buffer);
  request.mutable_recv()->set_length(1024);
  return request;
}

uint64_t Submit(RawSession& session, cclo::v1::SubmitRequest request) {
  request.set_timeout_ms(60'000);
  cclo::v1::SubmitResponse submitted;
  grpc::Status status = session.stub().Submit(session.Context().get(), request, &submitted);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return submitted.op_id();
}

cclo::v1::WaitResponse WaitOp(RawSession& session, uint64_t op_id) {
  cclo::v1::WaitRequest wait;
  wait.set_op_id(op_id);
  wait.set_timeout_ms(30'000);
  cclo::v1::WaitResponse done;
  grpc::Status status = session.stub().Wait(session.Context().get(), wait, &done);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(done.done()) << "op " << op_id << " still waits";
  return done;
}

}  // namespace cclo::testing
