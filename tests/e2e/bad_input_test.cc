// Bad input against one real cclod: each request gets a precise error, and the daemon
// keeps serving (a good op afterwards succeeds).
#include <gtest/gtest.h>

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

  std::string Token(RawSession& session) {
    cclo::v1::CreateCommunicatorIdResponse response;
    EXPECT_TRUE(session.stub().CreateCommunicatorId(session.Context().get(), {}, &response).ok());
    return response.token();
  }

  grpc::Status Join(RawSession& session, const std::string& token, uint32_t rank,
                    uint32_t size, uint64_t* handle = nullptr) {
    cclo::v1::JoinCommunicatorRequest request;
    request.set_token(token);
    request.set_rank(rank);
    request.set_size(size);
    request.set_timeout_ms(10'000);
    cclo::v1::JoinCommunicatorResponse response;
    grpc::Status status = session.stub().JoinCommunicator(session.Context().get(), request,
                                                          &response);
    if (handle) *handle = response.comm_handle();
    return status;
  }

  /// A one-rank communicator for `session`, ready for ops.
  uint64_t SoloComm(RawSession& session) {
    uint64_t handle = 0;
    grpc::Status status = Join(session, Token(session), 0, 1, &handle);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return handle;
  }

  static cclo::v1::SubmitRequest Allreduce(uint64_t handle, uint64_t buffer, uint64_t count) {
    cclo::v1::SubmitRequest request;
    request.set_comm_handle(handle);
    request.set_collective(cclo::v1::ALLREDUCE);
    request.set_datatype(cclo::v1::FLOAT32);
    request.set_count(count);
    for (cclo::v1::BufferRef* ref : {request.mutable_send(), request.mutable_recv()}) {
      ref->set_buffer_id(buffer);
      ref->set_length(count * 4);
    }
    return request;
  }

  /// Runs `request` to completion; the op's own status.
  grpc::Status Run(RawSession& session, const cclo::v1::SubmitRequest& request) {
    cclo::v1::SubmitResponse submitted;
    grpc::Status status = session.stub().Submit(session.Context().get(), request, &submitted);
    if (!status.ok()) return status;
    cclo::v1::WaitRequest wait;
    wait.set_op_id(submitted.op_id());
    wait.set_timeout_ms(20'000);
    cclo::v1::WaitResponse done;
    status = session.stub().Wait(session.Context().get(), wait, &done);
    if (!status.ok()) return status;
    EXPECT_TRUE(done.done());
    return grpc::Status(static_cast<grpc::StatusCode>(done.code()), done.message());
  }

  void ExpectStillServing() {
    RawSession session(daemon_->runtime_dir());
    uint64_t buffer = session.Alloc(4096);
    grpc::Status status = Run(session, Allreduce(SoloComm(session), buffer, 1024));
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
  ExpectError(Join(session, "cclo1-nonsense", 0, 1), grpc::StatusCode::INVALID_ARGUMENT,
              "malformed communicator token");
  ExpectStillServing();
}

TEST_F(BadInputTest, WrongSecret) {
  RawSession session(daemon_->runtime_dir());
  std::string token = Token(session);
  token[6 + 32 + 1] = token[6 + 32 + 1] == '0' ? '1' : '0';  // first secret digit
  ExpectError(Join(session, token, 0, 1), grpc::StatusCode::PERMISSION_DENIED,
              "token secret mismatch");
  ExpectStillServing();
}

TEST_F(BadInputTest, UnknownCommunicatorId) {
  RawSession session(daemon_->runtime_dir());
  std::string token = Token(session);
  token[6] = token[6] == '0' ? '1' : '0';  // first id digit
  ExpectError(Join(session, token, 0, 1), grpc::StatusCode::NOT_FOUND,
              "is not the root of communicator");
  ExpectStillServing();
}

TEST_F(BadInputTest, JoinWithRankNotBelowSize) {
  RawSession session(daemon_->runtime_dir());
  ExpectError(Join(session, Token(session), 2, 2), grpc::StatusCode::INVALID_ARGUMENT,
              "rank 2 >= size 2");
  ExpectError(Join(session, Token(session), 0, 0), grpc::StatusCode::INVALID_ARGUMENT,
              "size 0 is not in");
  ExpectStillServing();
}

TEST_F(BadInputTest, BufferOfAnotherSession) {
  RawSession owner(daemon_->runtime_dir());
  RawSession intruder(daemon_->runtime_dir());
  uint64_t foreign = owner.Alloc(4096);
  ExpectError(Run(intruder, Allreduce(SoloComm(intruder), foreign, 16)),
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
  ExpectError(Run(intruder, Allreduce(handle, intruder.Alloc(4096), 16)),
              grpc::StatusCode::NOT_FOUND, "no communicator handle");
  ExpectStillServing();
}

TEST_F(BadInputTest, OffsetOrLengthOutOfBounds) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  uint64_t handle = SoloComm(session);
  cclo::v1::SubmitRequest request = Allreduce(handle, buffer, 16);
  request.mutable_recv()->set_offset(4090);
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT, "is outside buffer");
  request = Allreduce(handle, buffer, 16);
  request.mutable_send()->set_offset(UINT64_MAX - 8);
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT, "is outside buffer");
  request = Allreduce(handle, buffer, 2048);  // 8 KiB of float32 in a 4 KiB buffer
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT, "is outside buffer");
  request = Allreduce(handle, buffer, 16);
  request.mutable_send()->set_length(32);
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT,
              "smaller than the 64 bytes");
  ExpectStillServing();
}

TEST_F(BadInputTest, PeerOutOfRangeOrSelf) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  cclo::v1::SubmitRequest request = Allreduce(SoloComm(session), buffer, 16);
  request.set_collective(cclo::v1::SEND);
  request.set_peer(5);
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT,
              "send peer 5 out of range for world size 1");
  request.set_peer(0);
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT,
              "is the calling rank itself");
  ExpectStillServing();
}

TEST_F(BadInputTest, CountOverflow) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  cclo::v1::SubmitRequest request = Allreduce(SoloComm(session), buffer, 1ull << 62);
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT, "overflows");
  ExpectStillServing();
}

TEST_F(BadInputTest, UnknownEnumValuesAndMissingSession) {
  RawSession session(daemon_->runtime_dir());
  uint64_t buffer = session.Alloc(4096);
  cclo::v1::SubmitRequest request = Allreduce(SoloComm(session), buffer, 16);
  request.set_datatype(static_cast<cclo::v1::DataType>(42));
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT, "unknown datatype 42");
  request.set_datatype(cclo::v1::FLOAT32);
  request.set_collective(static_cast<cclo::v1::Collective>(99));
  ExpectError(Run(session, request), grpc::StatusCode::INVALID_ARGUMENT,
              "unknown collective 99");

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
