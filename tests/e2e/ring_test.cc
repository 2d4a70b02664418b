// Hostile command rings: a session writes slots libcclo would never write straight into its
// command ring. Each gets a precise refusal on the completion ring, an index out of bounds
// stops the daemon serving that ring only, and another client is served throughout.
#include "cclo/v1/ring.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "hw/clock.h"
#include "hw/process.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/footprint.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    buffer_ = hostile_.Alloc(4096);
    ASSERT_TRUE(hostile_.Join(hostile_.NewToken(), 0, 1, &handle_).ok());
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon_.runtime_dir());
    ASSERT_TRUE(client.ok()) << client.status();
    bystander_ = *std::move(client);
    absl::StatusOr<std::string> token = bystander_->CreateCommunicatorId();
    ASSERT_TRUE(token.ok()) << token.status();
    absl::StatusOr<std::unique_ptr<Communicator>> comm = bystander_->Join(*token, 0, 1);
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = *std::move(comm);
    absl::StatusOr<Buffer> buffer = bystander_->AllocBuffer(4096);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    bystander_buffer_ = std::make_unique<Buffer>(*std::move(buffer));
  }

  /// A valid in-place allreduce of 16 floats as a slot, with `cookie`.
  ring::CommandSlot Valid(uint64_t cookie) {
    ring::CommandSlot slot;
    EXPECT_TRUE(ring::EncodeCommand(AllreduceRequest(handle_, buffer_, 16), cookie, slot).ok());
    return slot;
  }

  /// Posts `slot` and expects a refusal of its cookie with `code` and `message`.
  void ExpectRefused(const ring::CommandSlot& slot, absl::StatusCode code,
                     const std::string& message) {
    hostile_.Post(slot);
    const ring::CompletionSlot completion = hostile_.NextCompletion();
    EXPECT_EQ(completion.kind, static_cast<uint32_t>(ring::CompletionKind::kRejected));
    EXPECT_EQ(completion.cookie, slot.cookie);
    EXPECT_EQ(completion.code, static_cast<int32_t>(code)) << completion.message;
    EXPECT_EQ(std::string(completion.message), message);
  }

  /// The other client's allreduce, through its own ring: the daemon still serves it.
  void ExpectBystanderServed() {
    EXPECT_TRUE(comm_
                    ->Allreduce(*bystander_buffer_, *bystander_buffer_, 16, DataType::kFloat32,
                                ReduceOp::kSum)
                    .ok());
  }

  Daemon daemon_;
  RawSession hostile_{daemon_.runtime_dir()};
  uint64_t buffer_ = 0;
  uint64_t handle_ = 0;
  std::unique_ptr<Client> bystander_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Buffer> bystander_buffer_;
};

TEST_F(RingTest, MalformedSlotsGetPreciseRefusals) {
  ring::CommandSlot slot = Valid(1);
  slot.collective = 99;
  ExpectRefused(slot, absl::StatusCode::kInvalidArgument, "unknown collective 99");
  slot = Valid(2);
  slot.datatype = -3;
  ExpectRefused(slot, absl::StatusCode::kInvalidArgument, "unknown datatype -3");
  slot = Valid(3);
  slot.in_place = 7;
  ExpectRefused(slot, absl::StatusCode::kInvalidArgument,
                "command slot field in_place is 7; expected 0 or 1");
  slot = Valid(4);
  slot.reserved2 = 1;
  ExpectRefused(slot, absl::StatusCode::kInvalidArgument,
                "command slot has nonzero reserved bytes");
  slot = Valid(12);
  slot.kind = 7;
  ExpectRefused(slot, absl::StatusCode::kInvalidArgument,
                "command slot kind 7 is not a submission");
  slot = Valid(5);
  slot.after_count = 1000;
  ExpectRefused(slot, absl::StatusCode::kInvalidArgument,
                "command slot after_count 1000 exceeds 8");
  slot = Valid(6);
  std::memset(slot.algorithm, 'x', sizeof(slot.algorithm));
  ExpectRefused(slot, absl::StatusCode::kInvalidArgument,
                "command slot algorithm is not NUL-terminated within 32 bytes");
  slot = Valid(7);
  std::strcpy(slot.algorithm, "no-such\x01\xff");
  // Garbage in a NUL-terminated name reaches the engine like any unknown name, whose
  // error the op ends with (acceptance and end may come in either order).
  hostile_.Post(slot);
  ring::CompletionSlot first = hostile_.NextCompletion();
  ring::CompletionSlot second = hostile_.NextCompletion();
  if (first.kind > second.kind) std::swap(first, second);
  EXPECT_EQ(first.kind, static_cast<uint32_t>(ring::CompletionKind::kAccepted));
  EXPECT_EQ(second.kind, static_cast<uint32_t>(ring::CompletionKind::kFinished));
  EXPECT_EQ(second.cookie, 7u);
  EXPECT_EQ(second.code, static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(absl::StartsWith(second.message, "unknown allreduce algorithm 'no-such\\x01\\xff'"))
      << second.message;
  slot = Valid(8);
  slot.send.buffer_id = slot.recv.buffer_id = 999'999;
  ExpectRefused(slot, absl::StatusCode::kNotFound, "send buffer: no buffer 999999 in this session");
  slot = Valid(9);
  slot.recv.offset = 4050;
  ExpectRefused(
      slot, absl::StatusCode::kInvalidArgument,
      absl::StrCat("recv range [4050, +64) is outside buffer ", buffer_, " of 4096 bytes"));
  slot = Valid(10);
  slot.comm_handle = comm_->handle();  // the other session's
  ExpectRefused(slot, absl::StatusCode::kNotFound,
                absl::StrCat("no communicator handle ", comm_->handle(), " in this session"));
  slot = Valid(11);
  slot.after_count = 1;
  slot.after[0] = 123'456'789;
  ExpectRefused(slot, absl::StatusCode::kNotFound,
                "after: no op 123456789 in this session (never issued here, or already "
                "collected by Wait)");
  ExpectBystanderServed();

  // A valid command after all that is accepted and runs.
  EXPECT_TRUE(hostile_.RunOnRing(AllreduceRequest(handle_, buffer_, 16)).ok());
  // The session's gRPC path is untouched.
  EXPECT_TRUE(hostile_.Run(AllreduceRequest(handle_, buffer_, 16)).ok());
}

TEST_F(RingTest, AnOpsErrorQuotingItsSlotStillReachesTheWaitRpc) {
  // The result of an op whose completion is not consumed is also the Wait RPC's. Its error
  // quoted the slot's name whole, which the answer's string field cannot carry unless it
  // is UTF-8: Wait failed with no reason at all.
  ring::CommandSlot slot = Valid(1);
  std::strcpy(slot.algorithm, "caf\xe9");
  hostile_.Post(slot);
  hostile_.AwaitPosted(2);
  cclo::v1::WaitRequest request;
  request.set_op_id(hostile_.Posted(0).op_id);
  cclo::v1::WaitResponse response;
  const grpc::Status status = hostile_.stub().Wait(hostile_.Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_code() << " '" << status.error_message() << "'";
  EXPECT_EQ(response.code(), static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_TRUE(absl::StartsWith(response.message(), "unknown allreduce algorithm 'caf\\xe9'"))
      << response.message();
  ExpectBystanderServed();
}

TEST_F(RingTest, HeadOutOfBoundsStopsOnlyThatRing) {
  hostile_.PublishCommandHead(uint64_t{1} << 40);
  const ring::CompletionSlot completion = hostile_.NextCompletion();
  EXPECT_EQ(completion.kind, static_cast<uint32_t>(ring::CompletionKind::kRejected));
  EXPECT_EQ(completion.cookie, 0u);
  EXPECT_EQ(completion.code, static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(std::string(completion.message),
            "command ring head 1099511627776 is outside [0, 0 + 256]; the command ring is no "
            "longer served");
  ExpectBystanderServed();
  // The session itself still works through gRPC.
  EXPECT_TRUE(hostile_.Run(AllreduceRequest(handle_, buffer_, 16)).ok());
}

TEST_F(RingTest, AFloodOfCommandsIsServedInBatchesAndNothingIsLost) {
  // A full ring of commands, refused or accepted, each answered exactly once.
  constexpr uint64_t kCommands = ring::kCommandSlots;
  for (uint64_t cookie = 1; cookie <= kCommands; ++cookie) {
    ring::CommandSlot slot = Valid(cookie);
    if (cookie % 2 == 0) slot.collective = 99;
    hostile_.Post(slot);
  }
  std::map<uint64_t, int> answers;
  uint64_t finished = 0;
  while (answers.size() < kCommands || finished < kCommands / 2) {
    const ring::CompletionSlot completion = hostile_.NextCompletion();
    if (completion.kind == static_cast<uint32_t>(ring::CompletionKind::kFinished)) {
      EXPECT_EQ(completion.code, 0) << completion.message;
      ++finished;
    } else {
      ++answers[completion.cookie];
      EXPECT_EQ(completion.kind == static_cast<uint32_t>(ring::CompletionKind::kAccepted),
                completion.cookie % 2 == 1);
    }
  }
  for (const auto& [cookie, count] : answers) EXPECT_EQ(count, 1) << cookie;
  ExpectBystanderServed();
}

TEST_F(RingTest, KeptCompletionsArePostedWhenTheClientMakesRoomWithoutRinging) {
  // Two passes of valid commands fill the completion ring (an ACCEPTED and a FINISHED
  // each), and one more command's completions are kept for want of room.
  constexpr uint64_t kBatch = ring::kCompletionSlots / 4;
  uint64_t cookie = 1;
  for (int pass = 1; pass <= 2; ++pass) {
    std::vector<ring::CommandSlot> slots;
    for (uint64_t i = 0; i < kBatch; ++i) slots.push_back(Valid(cookie++));
    hostile_.PostAll(slots);
    hostile_.AwaitPosted(pass * 2 * kBatch);
  }
  hostile_.Post(Valid(cookie++));
  // A client consumes without ringing when it sees the daemon awake; here the daemon went
  // to sleep first, as when the client made room between its last look and its sleep.
  hostile_.AwaitDaemonSleeping();
  uint64_t answered = 0;
  while (answered < 2 * kBatch + 1) {
    const ring::CompletionSlot completion = hostile_.NextCompletion();
    if (completion.kind == static_cast<uint32_t>(ring::CompletionKind::kFinished)) {
      EXPECT_EQ(completion.code, 0) << completion.message;
      ++answered;
    }
  }
  ExpectBystanderServed();
}

TEST_F(RingTest, APassOverTheRingRingsASleepingClientOnce) {
  // Commands that one pass of the daemon takes get their answers and one doorbell, not a
  // doorbell for each answer and another for the room they left.
  constexpr uint64_t kCommands = 8;
  std::vector<ring::CommandSlot> slots;
  for (uint64_t cookie = 1; cookie <= kCommands; ++cookie) {
    slots.push_back(Valid(cookie));
    slots.back().collective = 99;  // refused: one answer each and nothing after it
  }
  hostile_.SetSleeping(true);
  EXPECT_EQ(hostile_.TakeDoorbellRings(absl::ZeroDuration()), 0u);
  hostile_.PostAll(slots);
  hostile_.AwaitPosted(kCommands);
  // The ring comes after the pass, which may still be running.
  EXPECT_EQ(hostile_.TakeDoorbellRings(absl::Seconds(30)), 1u);
  hostile_.SetSleeping(false);
  for (uint64_t cookie = 1; cookie <= kCommands; ++cookie) {
    const ring::CompletionSlot completion = hostile_.NextCompletion();
    EXPECT_EQ(completion.kind, static_cast<uint32_t>(ring::CompletionKind::kRejected));
    EXPECT_EQ(completion.cookie, cookie);
  }
  ExpectBystanderServed();
}

// While a command waits for room in its tenant's quota, the client's releases are kept to be
// made after it; RELEASE commands naming ids the session holds no result for, as many as the
// client likes, keep nothing.
TEST(RingReleaseTest, ReleasesOfUnknownIdsWhileACommandWaitsForRoomKeepNothing) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 1}\n");
  RawSession session(daemon.runtime_dir());
  uint64_t handle = 0;
  ASSERT_TRUE(session.Join(session.NewToken(), 0, 1, &handle).ok());
  const uint64_t buffer = session.Alloc(4096);
  // A receive that no send meets holds the quota's one op.
  cclo::v1::SubmitRequest receive = AllreduceRequest(handle, buffer, 16);
  receive.set_collective(cclo::v1::RECV);
  receive.clear_send();
  cclo::v1::SubmitResponse running;
  ASSERT_TRUE(session.stub().Submit(session.Context().get(), receive, &running).ok());
  cclo::v1::SubmitRequest waiting = AllreduceRequest(handle, buffer, 16);
  waiting.set_wait_for_room(true);
  ring::CommandSlot slot;
  ASSERT_TRUE(ring::EncodeCommand(waiting, 1, slot).ok());
  session.Post(slot);
  uint64_t posted = 1;
  const absl::StatusOr<hw::ProcessStat> before = hw::ReadProcessStat(daemon.process().pid());
  ASSERT_TRUE(before.ok()) << before.status();
  const auto rss_before = static_cast<int64_t>(before->resident_bytes >> 10);

  // 2^20 commands of 8 ids: kept, they would take 64 MiB.
  constexpr uint64_t kReleases = 1 << 20;
  uint64_t next_id = uint64_t{1} << 60;
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Seconds(60);
  while (session.CommandsTaken() < kReleases + 1) {
    ASSERT_LT(hw::SteadyNow(), deadline) << session.CommandsTaken() << " commands taken";
    std::vector<ring::CommandSlot> slots;
    while (posted + slots.size() < kReleases + 1 &&
           posted + slots.size() - session.CommandsTaken() < ring::kCommandSlots) {
      std::vector<uint64_t> ids;
      for (size_t i = 0; i < ring::kMaxAfter; ++i) ids.push_back(next_id++);
      slots.push_back(ring::EncodeRelease(ids));
    }
    if (slots.empty()) continue;
    session.PostAll(slots);
    posted += slots.size();
  }
  const absl::StatusOr<hw::ProcessStat> after = hw::ReadProcessStat(daemon.process().pid());
  ASSERT_TRUE(after.ok()) << after.status();
  const auto rss_after = static_cast<int64_t>(after->resident_bytes >> 10);
  EXPECT_LT(rss_after - rss_before, 16 << 10)
      << "resident memory grew from " << rss_before << " KiB to " << rss_after << " KiB";
}

// A client may make its doorbells block, and fill the one the daemon rings where it can
// write it: the daemon's rings never wait on it, so the engine goes on serving everyone.
TEST_F(RingTest, AJammedDoorbellStallsNoOne) {
  hostile_.SetSleeping(true);
  hostile_.JamDoorbells();
  ring::CommandSlot slot = Valid(1);
  slot.collective = 99;
  hostile_.Post(slot);
  hostile_.AwaitPosted(1);  // the doorbell stays full: reading it would unjam it
  const absl::Status served =
      comm_->Allreduce(*bystander_buffer_, *bystander_buffer_, 16, DataType::kFloat32,
                       ReduceOp::kSum, {.timeout = absl::Seconds(10)});
  EXPECT_TRUE(served.ok()) << served;
  const ring::CompletionSlot completion = hostile_.NextCompletion();
  EXPECT_EQ(completion.kind, static_cast<uint32_t>(ring::CompletionKind::kRejected));
}

}  // namespace
}  // namespace cclo::testing
