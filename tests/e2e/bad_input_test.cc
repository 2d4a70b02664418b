// Bad input against one real cclod: each request gets a precise error, and the daemon
// keeps serving (a good op afterwards succeeds).
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  /// A one-rank communicator for `session`, ready for ops.
  uint64_t SoloComm(RawSession& session) {
    uint64_t handle = 0;
    grpc::Status status = session.Join(session.NewToken(), 0, 1, &handle);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return handle;
  }

  void ExpectStillServing() {
    RawSession session(daemon_->runtime_dir());
    uint64_t buffer = session.Alloc(4096);
    grpc::Status status = session.Run(AllreduceRequest(SoloComm(session), buffer, 1024));
    EXPECT_TRUE(status.ok()) << status.error_message();
  }

  static Daemon* daemon_;
};

Daemon* BadInputTest::daemon_ = nullptr;

void ExpectError(const grpc::Status& status, grpc::StatusCode code, const std::string& text) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_NE(status.error_message().find(text), std::string::npos) << status.error_message();
}

TEST_F(BadInputTest, MalformedToken) {
  RawSession session(daemon_->runtime_dir());
  ExpectError(session.Join("cclo1-nonsense", 0, 1), grpc::StatusCode::INVALID_ARGUMENT,
              "malformed communicator token");
  ExpectStillServing();
}

TEST_F(BadInputTest, WrongSecret) {
  RawSession session(daemon_->runtime_dir());
  std::string token = session.NewToken();
  token[6 + 32 + 1] = token[6 + 32 + 1] == '0' ? '1' : '0';  // first secret digit
  ExpectError(session.Join(token, 0, 1), grpc::StatusCode::PERMISSION_DENIED,
              "token secret mismatch");
  ExpectStillServing();
}

TEST_F(BadInputTest, UnknownCommunicatorId) {
  RawSession session(daemon_->runtime_dir());
  std::string token = session.NewToken();
  token[6] = token[6] == '0' ? '1' : '0';  // first id digit
  ExpectError(session.Join(token, 0, 1), grpc::StatusCode::NOT_FOUND,
              "is not the root of communicator");
  ExpectStillServing();
}

TEST_F(BadInputTest, JoinWithRankNotBelowSize) {
  RawSession session(daemon_->runtime_dir());
  ExpectError(session.Join(session.NewToken(), 2, 2), grpc::StatusCode::INVALID_ARGUMENT,
              "rank 2 >= size 2");
  ExpectError(session.Join(session.NewToken(), 0, 0), grpc::StatusCode::INVALID_ARGUMENT,
              "size 0 is not in");
  ExpectStillServing();
}

// A join whose RPC deadline comes before its timeout ends by the RPC's deadline: the root
// answers in time with what is missing, and nothing goes on joining without the caller.
TEST_F(BadInputTest, JoinTimeoutLongerThanItsRpcDeadline) {
  RawSession session(daemon_->runtime_dir());
  cclo::v1::JoinCommunicatorRequest request;
  request.set_token(session.NewToken());
  request.set_rank(0);
  request.set_size(2);
  request.set_timeout_ms(600'000);
  std::unique_ptr<grpc::ClientContext> context = session.Context();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  cclo::v1::JoinCommunicatorResponse response;
  ExpectError(session.stub().JoinCommunicator(context.get(), request, &response),
              grpc::StatusCode::DEADLINE_EXCEEDED, "missing ranks 1");
  ExpectStillServing();
}

TEST_F(BadInputTest, BarrierWithACount) {
  RawSession session(daemon_->runtime_dir());
  cclo::v1::SubmitRequest request;
  request.set_comm_handle(SoloComm(session));
  request.set_collective(cclo::v1::BARRIER);
  request.set_datatype(cclo::v1::FLOAT64);
  request.set_count((1ull << 61) - 1);
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT,
              "barrier moves no data: its count must be 0, not 2305843009213693951");
  ExpectStillServing();
}

TEST_F(BadInputTest, BufferOfAnotherSession) {
  RawSession owner(daemon_->runtime_dir());
  RawSession intruder(daemon_->runtime_dir());
  uint64_t foreign = owner.Alloc(4096);
  ExpectError(intruder.Run(AllreduceRequest(SoloComm(intruder), foreign, 16)),
              grpc::StatusCode::NOT_FOUND, "no buffer");
  cclo::v1::FreeBufferRequest free_request;
  free_request.set_buffer_id(foreign);
  cclo::v1::FreeBufferResponse free_response;
  ExpectError(intruder.stub().FreeBuffer(intruder.Context().get(), free_request, &free_response),
              grpc::StatusCode::NOT_FOUND, "no buffer");
  ExpectStillServing();
}

TEST_F(BadInputTest, CommunicatorHandleOfAnotherSession) {
  RawSession owner(daemon_->runtime_dir());
  RawSession intruder(daemon_->runtime_dir());
  uint64_t handle = SoloComm(owner);
  ExpectError(intruder.Run(AllreduceRequest(handle, intruder.Alloc(4096), 16)),
              grpc::StatusCode::NOT_FOUND, "no communicator handle");
  ExpectStillServing();
}

TEST_F(BadInputTest, OffsetOrLengthOutOfBounds) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  uint64_t handle = SoloComm(session);
  cclo::v1::SubmitRequest request = AllreduceRequest(handle, buffer, 16);
  request.mutable_recv()->set_offset(4090);
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT, "is outside buffer");
  request = AllreduceRequest(handle, buffer, 16);
  request.mutable_send()->set_offset(UINT64_MAX - 8);
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT, "is outside buffer");
  request = AllreduceRequest(handle, buffer, 2048);  // 8 KiB of float32 in a 4 KiB buffer
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT, "is outside buffer");
  request = AllreduceRequest(handle, buffer, 16);
  request.mutable_send()->set_length(32);
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT,
              "smaller than the 64 bytes");
  ExpectStillServing();
}

TEST_F(BadInputTest, SendAndRecvRangesThatPartlyOverlap) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  uint64_t handle = SoloComm(session);
  cclo::v1::SubmitRequest request = AllreduceRequest(handle, buffer, 16);
  request.mutable_recv()->set_offset(32);  // send [0, 64), recv [32, 96)
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT,
              "allreduce: send and recv ranges overlap; only the in-place form may share memory");
  request.set_collective(cclo::v1::REDUCE_SCATTER);
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT,
              "reduce_scatter: send and recv ranges overlap");
  // Allgather's in-place input sits at chunk `rank`: one range for both is refused too.
  request = AllreduceRequest(handle, buffer, 16);
  request.set_collective(cclo::v1::ALLGATHER);
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT,
              "allgather: send and recv ranges overlap");
  // One range for both is allreduce's in-place form; ranges apart are two buffers.
  request = AllreduceRequest(handle, buffer, 16);
  EXPECT_TRUE(session.Run(request).ok());
  request.mutable_recv()->set_offset(64);
  EXPECT_TRUE(session.Run(request).ok());
  // What counts is the bytes the op uses: a longer send range over the recv one is fine.
  request.mutable_send()->set_length(4096);
  request.mutable_recv()->set_length(4032);
  EXPECT_TRUE(session.Run(request).ok());
  ExpectStillServing();
}

TEST_F(BadInputTest, PeerOutOfRange) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  cclo::v1::SubmitRequest request = AllreduceRequest(SoloComm(session), buffer, 16);
  request.set_collective(cclo::v1::SEND);
  request.set_peer(5);
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT,
              "send peer 5 out of range for world size 1");
  ExpectStillServing();
}

TEST_F(BadInputTest, SubmitReportsTheDeadlineItApplied) {
  RawSession session(daemon_->runtime_dir());
  cclo::v1::SubmitRequest request = AllreduceRequest(SoloComm(session), session.Alloc(4096), 16);
  for (uint32_t asked : {0u, 1234u}) {
    request.set_timeout_ms(asked);
    cclo::v1::SubmitResponse response;
    ASSERT_TRUE(session.stub().Submit(session.Context().get(), request, &response).ok());
    EXPECT_EQ(response.timeout_ms(), asked == 0 ? 60'000u : asked);  // daemon default: 60 s
  }
}

// A Wait whose call ends (here at its deadline) before the op it waits for does leaves the
// op's result for the next Wait, which gets it.
TEST_F(BadInputTest, AWaitCallThatEndsFirstLeavesTheResultForTheNext) {
  RawSession session(daemon_->runtime_dir());
  const uint64_t buffer = session.Alloc(4096);
  // A receive that no send meets holds the op that waits for it.
  cclo::v1::SubmitRequest receive = AllreduceRequest(SoloComm(session), buffer, 16);
  receive.set_collective(cclo::v1::RECV);
  receive.clear_send();
  cclo::v1::SubmitResponse held;
  ASSERT_TRUE(session.stub().Submit(session.Context().get(), receive, &held).ok());
  cclo::v1::SubmitRequest behind = receive;
  behind.mutable_recv()->set_offset(1024);
  behind.add_after(held.op_id());
  cclo::v1::SubmitResponse queued;
  ASSERT_TRUE(session.stub().Submit(session.Context().get(), behind, &queued).ok());

  cclo::v1::WaitRequest wait;
  wait.set_op_id(queued.op_id());
  wait.set_timeout_ms(30'000);
  cclo::v1::WaitResponse response;
  std::unique_ptr<grpc::ClientContext> short_call = session.Context();
  short_call->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  const grpc::Status first = session.stub().Wait(short_call.get(), wait, &response);
  EXPECT_TRUE(first.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
              (first.ok() && !response.done()))
      << first.error_message();
  // The op ends now; the first Wait's caller is gone and must not take its result.
  cclo::v1::CancelRequest cancel;
  cancel.set_op_id(queued.op_id());
  cclo::v1::CancelResponse cancelled;
  ASSERT_TRUE(session.stub().Cancel(session.Context().get(), cancel, &cancelled).ok());
  const grpc::Status second = session.stub().Wait(session.Context().get(), wait, &response);
  ASSERT_TRUE(second.ok()) << second.error_message();
  EXPECT_TRUE(response.done());
  EXPECT_EQ(response.code(), static_cast<int32_t>(grpc::StatusCode::CANCELLED));
  EXPECT_EQ(response.message(),
            absl::StrCat("op ", queued.op_id(), " was cancelled before it started"));
  ExpectStillServing();
}

// An algorithm name longer than any algorithm's is refused at Submit, as a command slot
// could not hold it, and no op keeps it.
TEST_F(BadInputTest, AlgorithmNameLongerThanAnyAlgorithms) {
  RawSession session(daemon_->runtime_dir());
  cclo::v1::SubmitRequest request = AllreduceRequest(SoloComm(session), session.Alloc(4096), 16);
  request.set_algorithm(std::string(4'000'000, 'a'));
  cclo::v1::SubmitResponse response;
  ExpectError(session.stub().Submit(session.Context().get(), request, &response),
              grpc::StatusCode::INVALID_ARGUMENT,
              "algorithm name of 4000000 bytes is longer than any algorithm's (at most 31)");
  request.set_algorithm(std::string(32, 'a'));
  ExpectError(session.stub().Submit(session.Context().get(), request, &response),
              grpc::StatusCode::INVALID_ARGUMENT,
              "algorithm name of 32 bytes is longer than any algorithm's (at most 31)");
  ExpectStillServing();
}

TEST_F(BadInputTest, CountOverflow) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  cclo::v1::SubmitRequest request = AllreduceRequest(SoloComm(session), buffer, 1ull << 62);
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT,
              "count 4611686018427387904 of float32 overflows a byte length");
  ExpectStillServing();
}

// A count that fits a byte length alone but not times the ranks' chunks.
TEST_F(BadInputTest, CountTimesRanksOverflow) {
  RawSession rank0(daemon_->runtime_dir()), rank1(daemon_->runtime_dir());
  const std::string token = rank0.NewToken();
  uint64_t handle = 0;
  grpc::Status joined1;
  std::thread join1([&] { joined1 = rank1.Join(token, 1, 2); });
  ASSERT_TRUE(rank0.Join(token, 0, 2, &handle).ok());
  join1.join();
  ASSERT_TRUE(joined1.ok()) << joined1.error_message();
  cclo::v1::SubmitRequest request;
  request.set_comm_handle(handle);
  request.set_collective(cclo::v1::ALLTOALL);
  request.set_datatype(cclo::v1::INT8);
  request.set_count(1ull << 63);
  const uint64_t buffer = rank0.Alloc(4096);
  for (cclo::v1::BufferRef* ref : {request.mutable_send(), request.mutable_recv()}) {
    ref->set_buffer_id(buffer);
    ref->set_length(4096);
  }
  ExpectError(rank0.Run(request), grpc::StatusCode::INVALID_ARGUMENT,
              "count 9223372036854775808 of int8 times 2 ranks overflows a byte length");
  ExpectStillServing();
}

TEST_F(BadInputTest, UnknownEnumValuesAndMissingSession) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  cclo::v1::SubmitRequest request = AllreduceRequest(SoloComm(session), buffer, 16);
  request.set_datatype(static_cast<cclo::v1::DataType>(42));
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT, "unknown datatype 42");
  request.set_datatype(cclo::v1::FLOAT32);
  request.set_collective(static_cast<cclo::v1::Collective>(99));
  ExpectError(session.Run(request), grpc::StatusCode::INVALID_ARGUMENT, "unknown collective 99");

  grpc::ClientContext anonymous;
  cclo::v1::AllocBufferRequest alloc;
  alloc.set_bytes(64);
  cclo::v1::AllocBufferResponse response;
  ExpectError(session.stub().AllocBuffer(&anonymous, alloc, &response),
              grpc::StatusCode::UNAUTHENTICATED, "cclo-session");
  alloc.set_bytes(0);
  ExpectError(session.stub().AllocBuffer(session.Context().get(), alloc, &response),
              grpc::StatusCode::INVALID_ARGUMENT, "buffer size 0");
  ExpectStillServing();
}

}  // namespace
}  // namespace cclo::testing
