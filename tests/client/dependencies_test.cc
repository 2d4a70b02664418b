// Ops that wait for other ops (OpOptions::after), Request::Cancel and per-op deadlines,
// against a real cclod: two sessions joined as ranks 0 and 1 of two communicators, driven
// from one thread through the async forms.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "cclo/v1/client.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"

namespace cclo {
namespace {

constexpr DataType kInt32 = DataType::kInt32;

// Two sessions, each rank 0 or 1 of communicators x and y, and one buffer per session.
struct Pair {
  std::unique_ptr<Client> clients[2];
  std::unique_ptr<Communicator> x[2];
  std::unique_ptr<Communicator> y[2];
  Buffer buffers[2];
};

// Joins ranks 0 and 1 of a new communicator from `clients` into `comms`.
void JoinBoth(std::unique_ptr<Client> (&clients)[2], std::unique_ptr<Communicator> (&comms)[2]) {
  absl::StatusOr<std::string> token = clients[0]->CreateCommunicatorId();
  ASSERT_TRUE(token.ok()) << token.status();
  std::thread rank1([&] {
    absl::StatusOr<std::unique_ptr<Communicator>> comm = clients[1]->Join(*token, 1, 2);
    ASSERT_TRUE(comm.ok()) << comm.status();
    comms[1] = *std::move(comm);
  });
  absl::StatusOr<std::unique_ptr<Communicator>> comm = clients[0]->Join(*token, 0, 2);
  ASSERT_TRUE(comm.ok()) << comm.status();
  comms[0] = *std::move(comm);
  rank1.join();
}

class DependenciesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new testing::Daemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    for (auto& client : pair_.clients) {
      absl::StatusOr<std::unique_ptr<Client>> attached = Client::Attach(daemon_->runtime_dir());
      ASSERT_TRUE(attached.ok()) << attached.status();
      client = *std::move(attached);
    }
    JoinBoth(pair_.clients, pair_.x);
    JoinBoth(pair_.clients, pair_.y);
    for (int rank = 0; rank < 2; ++rank) {
      absl::StatusOr<Buffer> buffer = pair_.clients[rank]->AllocBuffer(64);
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      pair_.buffers[rank] = *std::move(buffer);
    }
  }

  int32_t& Element(int rank, size_t index) { return pair_.buffers[rank].span<int32_t>()[index]; }

  static testing::Daemon* daemon_;
  Pair pair_;
};

testing::Daemon* DependenciesTest::daemon_ = nullptr;

TEST_F(DependenciesTest, OpStartsAfterTheOpItWaitsFor) {
  // Rank 0 forwards, over communicator y, what it receives over x: its bcast waits for the
  // receive, so it sends the received value, not the buffer's old one.
  Element(0, 0) = -1;
  absl::StatusOr<Request> receive = pair_.x[0]->RecvAsync(pair_.buffers[0], 0, 1, kInt32, 1, 1);
  ASSERT_TRUE(receive.ok()) << receive.status();
  absl::StatusOr<Request> forward =
      pair_.y[0]->BcastAsync(pair_.buffers[0], 0, 1, kInt32, 0, {.after = {&*receive}});
  ASSERT_TRUE(forward.ok()) << forward.status();
  absl::StatusOr<Request> forwarded = pair_.y[1]->BcastAsync(pair_.buffers[1], 4, 1, kInt32, 0);
  ASSERT_TRUE(forwarded.ok()) << forwarded.status();
  Element(1, 0) = 42;
  ASSERT_TRUE(pair_.x[1]->Send(pair_.buffers[1], 0, 1, kInt32, 0, 1).ok());
  EXPECT_TRUE(forward->Wait().ok());
  EXPECT_TRUE(forwarded->Wait().ok());
  EXPECT_TRUE(receive->Wait().ok());
  EXPECT_EQ(Element(1, 1), 42);
  // A request known to have finished OK is no longer sent to the daemon, and satisfied.
  absl::StatusOr<Request> send =
      pair_.x[0]->SendAsync(pair_.buffers[0], 0, 1, kInt32, 1, 2, {.after = {&*receive}});
  ASSERT_TRUE(send.ok()) << send.status();
  EXPECT_TRUE(pair_.x[1]->Recv(pair_.buffers[1], 8, 1, kInt32, 0, 2).ok());
  EXPECT_TRUE(send->Wait().ok());
  EXPECT_EQ(Element(1, 2), 42);
}

TEST_F(DependenciesTest, FailedDependencyAbortsTheOpsWaitingForIt) {
  Communicator& comm = *pair_.x[0];
  Buffer& buffer = pair_.buffers[0];
  absl::StatusOr<Request> failing =
      comm.BcastAsync(buffer, 0, 1, kInt32, 0, {.algorithm = "no_such_algorithm"});
  ASSERT_TRUE(failing.ok()) << failing.status();
  absl::StatusOr<Request> dependent =
      pair_.y[0]->SendAsync(buffer, 0, 1, kInt32, 1, 20, {.after = {&*failing}});
  ASSERT_TRUE(dependent.ok()) << dependent.status();
  absl::StatusOr<Request> transitive =
      pair_.y[0]->SendAsync(buffer, 0, 1, kInt32, 1, 21, {.after = {&*dependent}});
  ASSERT_TRUE(transitive.ok()) << transitive.status();

  const absl::Status failed = failing->Wait();
  ASSERT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  const std::string first =
      absl::StrCat("op ", failing->op_id(),
                   " that this op waits for failed: INVALID_ARGUMENT: ", failed.message());
  absl::Status status = dependent->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), first);
  status = transitive->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), absl::StrCat("op ", dependent->op_id(),
                                           " that this op waits for failed: ABORTED: ", first));
  // Once this process has collected the failure, the next op fails before it is sent.
  absl::StatusOr<Request> late = pair_.y[0]->BarrierAsync({.after = {&*failing}});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(late.status().message(), first);
  // The aborted sends are as if never submitted: the communicators still work.
  std::thread peer([&] { EXPECT_TRUE(pair_.y[1]->Barrier().ok()); });
  EXPECT_TRUE(pair_.y[0]->Barrier().ok());
  peer.join();
}

TEST_F(DependenciesTest, CancelWithdrawsOnlyAWaitingOp) {
  absl::StatusOr<Request> receive = pair_.x[0]->RecvAsync(pair_.buffers[0], 0, 1, kInt32, 1, 3);
  ASSERT_TRUE(receive.ok()) << receive.status();
  absl::StatusOr<Request> waiting =
      pair_.y[0]->SendAsync(pair_.buffers[0], 0, 1, kInt32, 1, 4, {.after = {&*receive}});
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  absl::StatusOr<Request> dependent =
      pair_.y[0]->SendAsync(pair_.buffers[0], 0, 1, kInt32, 1, 5, {.after = {&*waiting}});
  ASSERT_TRUE(dependent.ok()) << dependent.status();

  ASSERT_TRUE(waiting->Cancel().ok());
  absl::Status status = waiting->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(status.message(),
            absl::StrCat("op ", waiting->op_id(), " was cancelled before it started"));
  EXPECT_EQ(dependent->Wait().code(), absl::StatusCode::kAborted);

  // The receive is in the engine: it cannot be withdrawn and goes on.
  status = receive->Cancel();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            absl::StrCat("Cancel: op ", receive->op_id(),
                         " already went to the engine, where it runs with the other ranks; it "
                         "cannot be cancelled and goes on"));
  Element(1, 0) = 7;
  ASSERT_TRUE(pair_.x[1]->Send(pair_.buffers[1], 0, 1, kInt32, 0, 3).ok());
  EXPECT_TRUE(receive->Wait().ok());
  EXPECT_EQ(Element(0, 0), 7);
  EXPECT_EQ(receive->Cancel().message(),
            absl::StrCat("op ", receive->op_id(), " already finished"));
  // The cancelled and the aborted send never went out: communicator y still pairs ops as
  // before.
  std::thread peer([&] { EXPECT_TRUE(pair_.y[1]->Barrier().ok()); });
  EXPECT_TRUE(pair_.y[0]->Barrier().ok());
  peer.join();
}

// A collective withdrawn on every rank (here cancelled while it waited for a receive on
// the other communicator) keeps its place: the collectives after it pair as before.
TEST_F(DependenciesTest, ACollectiveWithdrawnOnEveryRankLeavesTheNextOnesPaired) {
  std::vector<Request> receives, held;
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<Request> receive =
        pair_.x[rank]->RecvAsync(pair_.buffers[rank], 0, 1, kInt32, 1 - rank, 11);
    ASSERT_TRUE(receive.ok()) << receive.status();
    absl::StatusOr<Request> bcast =
        pair_.y[rank]->BcastAsync(pair_.buffers[rank], 4, 1, kInt32, 0, {.after = {&*receive}});
    ASSERT_TRUE(bcast.ok()) << bcast.status();
    ASSERT_TRUE(bcast->Cancel().ok());
    EXPECT_EQ(bcast->Wait().code(), absl::StatusCode::kCancelled);
    receives.push_back(*std::move(receive));
  }
  Element(0, 1) = 42;
  std::thread peer([&] { EXPECT_TRUE(pair_.y[1]->Bcast(pair_.buffers[1], 4, 1, kInt32, 0).ok()); });
  EXPECT_TRUE(pair_.y[0]->Bcast(pair_.buffers[0], 4, 1, kInt32, 0).ok());
  peer.join();
  EXPECT_EQ(Element(1, 1), 42);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(pair_.x[rank]->Send(pair_.buffers[rank], 8, 1, kInt32, 1 - rank, 11).ok());
  }
  for (Request& receive : receives) EXPECT_TRUE(receive.Wait().ok());
}

// A collective withdrawn on one rank only still keeps its place there: the other rank's
// part of it gets nothing from that rank (and ends at its deadline) instead of meeting
// the next collective, whose data would land in the wrong op.
TEST_F(DependenciesTest, ACollectiveWithdrawnOnOneRankIsNotMetByTheNextOne) {
  absl::StatusOr<Request> receive = pair_.x[0]->RecvAsync(pair_.buffers[0], 0, 1, kInt32, 1, 12);
  ASSERT_TRUE(receive.ok()) << receive.status();
  absl::StatusOr<Request> withdrawn =
      pair_.y[0]->BcastAsync(pair_.buffers[0], 4, 1, kInt32, 0, {.after = {&*receive}});
  ASSERT_TRUE(withdrawn.ok()) << withdrawn.status();
  ASSERT_TRUE(withdrawn->Cancel().ok());
  EXPECT_EQ(withdrawn->Wait().code(), absl::StatusCode::kCancelled);

  Element(1, 1) = -1;
  absl::StatusOr<Request> first =
      pair_.y[1]->BcastAsync(pair_.buffers[1], 4, 1, kInt32, 0, {.timeout = absl::Seconds(2)});
  ASSERT_TRUE(first.ok()) << first.status();
  Element(0, 1) = 42;
  absl::StatusOr<Request> next =
      pair_.y[0]->BcastAsync(pair_.buffers[0], 4, 1, kInt32, 0, {.timeout = absl::Seconds(2)});
  ASSERT_TRUE(next.ok()) << next.status();
  const absl::Status status = first->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_EQ(Element(1, 1), -1);
  next->Wait().IgnoreError();  // it may have gone out eagerly, or ended with the communicator
  EXPECT_TRUE(pair_.x[1]->Send(pair_.buffers[1], 8, 1, kInt32, 0, 12).ok());
  EXPECT_TRUE(receive->Wait().ok());
}

TEST_F(DependenciesTest, WaitingOpEndsAtItsOwnDeadline) {
  absl::StatusOr<Request> receive = pair_.x[0]->RecvAsync(pair_.buffers[0], 0, 1, kInt32, 1, 5);
  ASSERT_TRUE(receive.ok()) << receive.status();
  absl::StatusOr<Request> waiting =
      pair_.y[0]->BarrierAsync({.timeout = absl::Milliseconds(200), .after = {&*receive}});
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  const std::string late = absl::StrCat("barrier on rank 0 of communicator ", pair_.y[0]->id_hex(),
                                        " did not finish by its deadline: it was still waiting "
                                        "for op ",
                                        receive->op_id());
  absl::Status status = waiting->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(), late);
  // As for an engine call past its deadline, the communicator broke; x is untouched.
  status = pair_.y[1]->Barrier();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            absl::StrCat("Submit: communicator ", pair_.y[0]->id_hex(), " is broken: ", late));
  ASSERT_TRUE(pair_.x[1]->Send(pair_.buffers[1], 0, 1, kInt32, 0, 5).ok());
  EXPECT_TRUE(receive->Wait().ok());
}

TEST_F(DependenciesTest, RequestsOfAnotherClientAreRefused) {
  absl::StatusOr<Request> other = pair_.y[1]->BarrierAsync();
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<Request> refused = pair_.y[0]->BarrierAsync({.after = {&*other}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            absl::StrCat("after: op ", other->op_id(), " belongs to another Client"));
  absl::StatusOr<Request> null = pair_.y[0]->BarrierAsync({.after = {nullptr}});
  EXPECT_EQ(null.status().message(), "after: a null request");
  // One of this Client's, moved from: said so, not taken for another Client's op.
  absl::StatusOr<Request> mine = pair_.y[0]->NopAsync();
  ASSERT_TRUE(mine.ok()) << mine.status();
  Request taken = *std::move(mine);
  absl::StatusOr<Request> moved_from = pair_.y[0]->BarrierAsync({.after = {&*mine}});
  EXPECT_EQ(moved_from.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(moved_from.status().message(), "after: this Request was moved from");
  EXPECT_TRUE(taken.Wait().ok());
  EXPECT_TRUE(pair_.y[0]->Barrier().ok());
  EXPECT_TRUE(other->Wait().ok());
}

TEST_F(DependenciesTest, AnOpWaitsForAtMostEightOthers) {
  std::vector<Request> receives;
  std::vector<const Request*> after;
  for (uint32_t tag = 10; tag < 19; ++tag) {
    absl::StatusOr<Request> receive =
        pair_.x[0]->RecvAsync(pair_.buffers[0], 4 * (tag - 10), 1, kInt32, 1, tag);
    ASSERT_TRUE(receive.ok()) << receive.status();
    receives.push_back(*std::move(receive));
  }
  for (const Request& receive : receives) after.push_back(&receive);
  absl::StatusOr<Request> refused = pair_.y[0]->BarrierAsync({.after = after});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "Submit: after lists 9 ops; a command slot holds 8");
  // Eight are taken; nothing was posted for the refused op.
  after.pop_back();
  absl::StatusOr<Request> waiting = pair_.y[0]->BarrierAsync({.after = after});
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  for (uint32_t tag = 10; tag < 19; ++tag) {
    Element(1, 0) = static_cast<int32_t>(tag);
    ASSERT_TRUE(pair_.x[1]->Send(pair_.buffers[1], 0, 1, kInt32, 0, tag).ok());
  }
  for (Request& receive : receives) EXPECT_TRUE(receive.Wait().ok());
  for (uint32_t tag = 10; tag < 19; ++tag)
    EXPECT_EQ(Element(0, tag - 10), static_cast<int32_t>(tag));
  std::thread peer([&] { EXPECT_TRUE(pair_.y[1]->Barrier().ok()); });
  EXPECT_TRUE(waiting->Wait().ok());
  peer.join();
}

TEST_F(DependenciesTest, DaemonRefusesUnknownAndRepeatedIds) {
  testing::RawSession raw(daemon_->runtime_dir());
  std::string token = raw.NewToken();
  uint64_t handle = 0;
  ASSERT_TRUE(raw.Join(token, 0, 1, &handle).ok());
  const uint64_t buffer = raw.Alloc(64);
  cclo::v1::SubmitRequest request = testing::AllreduceRequest(handle, buffer, 4);
  // An op id of another session is no op of this one.
  absl::StatusOr<Request> foreign = pair_.y[0]->BarrierAsync();
  ASSERT_TRUE(foreign.ok());
  request.add_after(foreign->op_id());
  cclo::v1::SubmitResponse response;
  grpc::Status status = raw.stub().Submit(raw.Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(),
            absl::StrCat("after: no op ", foreign->op_id(),
                         " in this session (never issued here, or already collected by Wait)"));
  request.clear_after();
  ASSERT_TRUE(raw.stub().Submit(raw.Context().get(), request, &response).ok());
  request.add_after(response.op_id());
  request.add_after(response.op_id());
  status = raw.stub().Submit(raw.Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), absl::StrCat("after lists op ", request.after(0), " twice"));
  cclo::v1::CancelRequest cancel;
  cancel.set_op_id(987654321);
  cclo::v1::CancelResponse cancelled;
  status = raw.stub().Cancel(raw.Context().get(), cancel, &cancelled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "no op 987654321 pending in this session");
  std::thread peer([&] { EXPECT_TRUE(pair_.y[1]->Barrier().ok()); });
  EXPECT_TRUE(foreign->Wait().ok());
  peer.join();
}

}  // namespace
}  // namespace cclo
