// `ccloctl drain` against real daemons: new work is refused with the reason while the ops
// already submitted finish; then the daemon exits with status 0. An op that cannot finish
// is cut off at the drain's timeout, failing with the reason here and on the peer.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "cclo/client.h"
#include "cclo/v1/admin.pb.h"
#include "google/protobuf/util/json_util.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/pairs.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

/// `ccloctl drain --json --timeout seconds` against `daemon`, running.
std::unique_ptr<Process> StartDrain(const Daemon& daemon, const std::string& seconds) {
  return std::make_unique<Process>(
      std::vector<std::string>{Runfile("client/ccloctl"), "--runtime-dir", daemon.runtime_dir(),
                               "drain", "--timeout", seconds, "--json"});
}

/// The JSON answer on the first line of a drain's output.
cclo::v1::DrainResponse DrainAnswer(const ProcessResult& drain) {
  const std::string first_line = drain.output.substr(0, drain.output.find('\n'));
  cclo::v1::DrainResponse response;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(first_line, &response).ok())
      << drain.output;
  return response;
}

TEST(DrainTest, OpInFlightFinishesNewWorkIsRefusedAndTheDaemonExitsZero) {
  auto a = std::make_unique<Daemon>();
  Daemon b;
  RawSession rank0(a->runtime_dir()), rank1(b.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  const uint64_t buffer0 = rank0.Alloc(4096), buffer1 = rank1.Alloc(4096);
  // Rank 0's allreduce is in flight: it waits for rank 1, which has not submitted yet.
  const uint64_t op0 = Submit(rank0, AllreduceRequest(handle0, buffer0, 1024));

  std::unique_ptr<Process> drain = StartDrain(*a, "60");
  ASSERT_TRUE(
      WaitUntil([&] { return AdminJson<cclo::v1::StatusResponse>(*a, {"status"}).draining(); },
                absl::Seconds(20)))
      << drain->Output();
  EXPECT_NE(Scrape(*a).find("\ncclod_draining 1\n"), std::string::npos);

  // New ops, buffers, joins and attaches are refused with the reason.
  grpc::Status op = rank0.Run(AllreduceRequest(handle0, buffer0, 1024));
  EXPECT_EQ(op.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(op.error_message(), "cclod is draining: new ops refused");
  EXPECT_NE(Scrape(*a).find("\ncclod_submits_refused_total{reason=\"unavailable\"} 1\n"),
            std::string::npos)
      << Scrape(*a);
  cclo::v1::AllocBufferRequest alloc;
  alloc.set_bytes(4096);
  cclo::v1::AllocBufferResponse allocated;
  grpc::Status buffer = rank0.stub().AllocBuffer(rank0.Context().get(), alloc, &allocated);
  EXPECT_EQ(buffer.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(buffer.error_message(), "cclod is draining: new buffers refused");
  grpc::Status join = rank0.Join(rank1.NewToken(), 0, 2);
  EXPECT_EQ(join.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(join.error_message(), "cclod is draining: joins refused");
  absl::StatusOr<std::unique_ptr<Client>> attach = Client::Attach(a->runtime_dir());
  EXPECT_EQ(attach.status().code(), absl::StatusCode::kUnavailable) << attach.status();
  EXPECT_EQ(attach.status().message(),
            "cclod refused the attach: cclod is draining: new sessions refused");

  // Rank 1 submits its part: the op in flight completes and its result is collected.
  grpc::Status peer = rank1.Run(AllreduceRequest(handle1, buffer1, 1024));
  EXPECT_TRUE(peer.ok()) << peer.error_message();
  const cclo::v1::WaitResponse done = WaitOp(rank0, op0);
  EXPECT_EQ(done.code(), 0) << done.message();

  // The drain reports it and the daemon exits with status 0.
  const ProcessResult drained = drain->Wait(absl::Seconds(30));
  EXPECT_EQ(drained.exit_code, 0) << drained.output;
  const cclo::v1::DrainResponse answer = DrainAnswer(drained);
  EXPECT_EQ(answer.ops_in_flight(), 1u);
  EXPECT_EQ(answer.ops_completed(), 1u);
  EXPECT_EQ(answer.ops_failed(), 0u);
  EXPECT_EQ(answer.ops_cut_off(), 0u);
  EXPECT_EQ(answer.results_uncollected(), 0u);
  EXPECT_FALSE(answer.timed_out());
  const ProcessResult stopped = a->process().Wait(absl::Seconds(30));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output.substr(0, 4000);
  EXPECT_NE(stopped.output.find("cclod stopped"), std::string::npos);
  // It stopped on its own, which its log says instead of a signal from outside.
  EXPECT_NE(stopped.output.find("shutting down: the drain finished"), std::string::npos)
      << stopped.output;
  EXPECT_EQ(stopped.output.find("received signal"), std::string::npos) << stopped.output;
}

TEST(DrainTest, JoinsAtADrainingRootFailAtOnceWithTheReason) {
  auto a = std::make_unique<Daemon>();
  Daemon b;
  RawSession rank0(a->runtime_dir()), rank1(b.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  // An op in flight keeps daemon a draining (and alive) while ranks on b join
  // communicators that a roots.
  const uint64_t op0 = Submit(rank0, AllreduceRequest(handle0, rank0.Alloc(4096), 1024));
  const std::string waited_token = rank0.NewToken(), late_token = rank0.NewToken();
  // Rank 1 of 3 waits at a for ranks 0 and 2, which never join. Its join timeout lies far
  // beyond the call's 30 s deadline, so that only the drain waking it gives the reason:
  // otherwise the call ends at that deadline, with DEADLINE_EXCEEDED.
  RawSession waiting(b.runtime_dir());
  cclo::v1::JoinCommunicatorRequest join;
  join.set_token(waited_token);
  join.set_rank(1);
  join.set_size(3);
  join.set_timeout_ms(600'000);
  grpc::Status waited;
  std::thread joiner([&] {
    cclo::v1::JoinCommunicatorResponse response;
    waited = waiting.stub().JoinCommunicator(waiting.Context().get(), join, &response);
  });
  if (!a->process().WaitForOutput("rank 1 of 3 from", absl::Seconds(20))) {
    joiner.join();
    FAIL() << "the join did not reach the root: " << waited.error_message();
  }

  std::unique_ptr<Process> drain = StartDrain(*a, "60");
  joiner.join();
  const std::string refused = "cclod is draining: joins refused";
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE) << waited.error_message();
  EXPECT_EQ(waited.error_message(),
            "join at root daemon " + a->peer_address() + " failed: " + refused);
  RawSession late(b.runtime_dir());
  grpc::Status joined_late = late.Join(late_token, 1, 2);
  EXPECT_EQ(joined_late.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(joined_late.error_message(),
            "join at root daemon " + a->peer_address() + " failed: " + refused);

  // The op in flight still completes, and the drain with it.
  ASSERT_TRUE(rank1.Run(AllreduceRequest(handle1, rank1.Alloc(4096), 1024)).ok());
  EXPECT_EQ(WaitOp(rank0, op0).code(), 0);
  EXPECT_EQ(drain->Wait(absl::Seconds(30)).exit_code, 0);
  EXPECT_EQ(a->process().Wait(absl::Seconds(30)).exit_code, 0);
}

TEST(DrainTest, StuckOpIsCutOffAtTheTimeoutWithTheReasonAndTheDaemonExits) {
  auto a = std::make_unique<Daemon>();
  Daemon b;
  RawSession rank0(a->runtime_dir()), rank1(b.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  // Rank 0 waits for a message rank 1 never sends.
  const uint64_t op0 = Submit(rank0, RecvRequest(handle0, rank0.Alloc(4096), 1));
  cclo::v1::WaitResponse cut;
  std::thread waiter([&] { cut = WaitOp(rank0, op0); });

  const ProcessResult drained = StartDrain(*a, "1")->Wait(absl::Seconds(30));
  waiter.join();
  const std::string reason = "cclod is draining and its drain timeout (1s) passed";
  EXPECT_EQ(cut.code(), grpc::StatusCode::UNAVAILABLE) << cut.message();
  EXPECT_NE(cut.message().find(reason), std::string::npos) << cut.message();
  EXPECT_EQ(drained.exit_code, 1) << drained.output;
  EXPECT_NE(drained.output.find("ccloctl: drain timed out after 1 s: 1 ops cut off, 0 results "
                                "not collected\n"),
            std::string::npos)
      << drained.output;
  const cclo::v1::DrainResponse answer = DrainAnswer(drained);
  EXPECT_EQ(answer.ops_in_flight(), 1u);
  EXPECT_EQ(answer.ops_completed(), 0u);
  EXPECT_EQ(answer.ops_cut_off(), 1u);
  EXPECT_EQ(answer.results_uncollected(), 0u);
  EXPECT_TRUE(answer.timed_out());
  const ProcessResult stopped = a->process().Wait(absl::Seconds(30));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output.substr(0, 4000);

  // The peer rank learns why rank 0 left.
  grpc::Status peer = rank1.Run(RecvRequest(handle1, rank1.Alloc(4096), 0));
  EXPECT_EQ(peer.error_code(), grpc::StatusCode::UNAVAILABLE) << peer.error_message();
  EXPECT_NE(peer.error_message().find(reason), std::string::npos) << peer.error_message();
}

TEST(DrainTest, SecondDrainIsRefusedAndAClientLeavingEndsTheWait) {
  auto a = std::make_unique<Daemon>();
  // Both ranks on a; rank 0 waits for a message rank 1 never sends.
  auto rank0 = std::make_unique<RawSession>(a->runtime_dir());
  auto rank1 = std::make_unique<RawSession>(a->runtime_dir());
  auto [handle0, handle1] = JoinPair(*rank0, *rank1);
  Submit(*rank0, RecvRequest(handle0, rank0->Alloc(4096), 1));

  std::unique_ptr<Process> drain = StartDrain(*a, "600");
  ASSERT_TRUE(
      WaitUntil([&] { return AdminJson<cclo::v1::StatusResponse>(*a, {"status"}).draining(); },
                absl::Seconds(20)))
      << drain->Output();
  const ProcessResult second = Ccloctl(*a, {"drain"});
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_NE(second.output.find("Drain at unix:" + a->runtime_dir() +
                               "/admin.sock: cclod is already draining"),
            std::string::npos)
      << second.output;

  // The clients exit: their op ends with them and the drain finishes without a timeout.
  rank0.reset();
  rank1.reset();
  const ProcessResult drained = drain->Wait(absl::Seconds(30));
  EXPECT_EQ(drained.exit_code, 0) << drained.output;
  const cclo::v1::DrainResponse answer = DrainAnswer(drained);
  EXPECT_EQ(answer.ops_in_flight(), 1u);
  EXPECT_EQ(answer.ops_failed(), 1u);
  EXPECT_EQ(answer.ops_cut_off(), 0u);
  EXPECT_FALSE(answer.timed_out());
  EXPECT_EQ(a->process().Wait(absl::Seconds(30)).exit_code, 0);
}

TEST(DrainTest, ResultsConsumedFromTheCompletionRingAreNotHeld) {
  auto a = std::make_unique<Daemon>();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(a->runtime_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> token = (*client)->CreateCommunicatorId();
  ASSERT_TRUE(token.ok()) << token.status();
  absl::StatusOr<std::unique_ptr<Communicator>> comm = (*client)->Join(*token, 0, 1);
  ASSERT_TRUE(comm.ok()) << comm.status();
  absl::StatusOr<Buffer> buffer = (*client)->AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  // Through the rings, as libcclo runs every op; the client then posts nothing more.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*comm)->Allreduce(*buffer, *buffer, 16, DataType::kFloat32, ReduceOp::kSum).ok());
  }

  // The daemon let go of the results libcclo consumed: the drain has nothing to wait for.
  std::unique_ptr<Process> drain = StartDrain(*a, "60");
  const ProcessResult drained = drain->Wait(absl::Seconds(90));
  EXPECT_EQ(drained.exit_code, 0) << drained.output;
  const cclo::v1::DrainResponse answer = DrainAnswer(drained);
  EXPECT_EQ(answer.ops_in_flight(), 0u);
  EXPECT_EQ(answer.results_uncollected(), 0u);
  EXPECT_FALSE(answer.timed_out());
  comm->reset();
  client->reset();
  EXPECT_EQ(a->process().Wait(absl::Seconds(30)).exit_code, 0);
}

// A Submit that waits for room in its tenant's in-flight quota when a drain begins is
// refused once room comes, not accepted behind the drain's back.
TEST(DrainTest, ASubmitWaitingForRoomWhenTheDrainBeganIsRefused) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 1}\n");
  RawSession rank0(daemon.runtime_dir()), rank1(daemon.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  const uint64_t buffer0 = rank0.Alloc(4096), buffer1 = rank1.Alloc(4096);
  // Rank 0's receive holds the tenant's one op in flight until its 5 s deadline.
  cclo::v1::SubmitRequest holding = RecvRequest(handle0, buffer0, 1);
  holding.set_timeout_ms(5000);
  cclo::v1::SubmitResponse held;
  ASSERT_TRUE(rank0.stub().Submit(rank0.Context().get(), holding, &held).ok());
  grpc::Status waited;
  std::thread waiting([&] {
    cclo::v1::SubmitRequest request = RecvRequest(handle1, buffer1, 0);
    request.set_wait_for_room(true);
    cclo::v1::SubmitResponse response;
    waited = rank1.stub().Submit(rank1.Context().get(), request, &response);
  });
  // Gives rank 1's Submit time to reach its wait; one that arrived after the drain began
  // would be refused at once, which would not test the wait.
  absl::SleepFor(absl::Milliseconds(500));
  std::unique_ptr<Process> drain = StartDrain(daemon, "20");
  EXPECT_TRUE(
      WaitUntil([&] { return AdminJson<cclo::v1::StatusResponse>(daemon, {"status"}).draining(); },
                absl::Seconds(20)));
  waiting.join();  // room comes at rank 0's deadline
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE) << waited.error_message();
  EXPECT_EQ(waited.error_message(), "cclod is draining: new ops refused");
  const ProcessResult drained = drain->Wait(absl::Seconds(30));
  EXPECT_EQ(DrainAnswer(drained).ops_cut_off(), 0u) << drained.output;
}

}  // namespace
}  // namespace cclo::testing
