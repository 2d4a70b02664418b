// The DMP on a communicator whose ranks are all local: programs written by hand, so that
// moves the firmware does not emit yet (reduce to the network, discarding receives) and
// local eager and rendezvous sends are covered without sockets.
#include "hw/emu/dmp.h"

#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hw/clock.h"

namespace cclo::hw::emu {
namespace {

constexpr uint64_t kSegment = 4096;

class DmpTest : public ::testing::Test {
 protected:
  DmpTest() {
    comm_.id = CommId{3};
    comm_.ranks = {{"here:1"}, {"here:1"}};
    comm_.local = {true, true};
    comm_.ready = true;
  }

  /// Submits `program` for `rank` of a call with int32 elements and serves every unit it
  /// schedules; returns its slot in done_.
  size_t Submit(uint32_t rank, std::vector<Move> moves, std::array<std::vector<int32_t>*, 3> slots,
                hw::SteadyTime deadline = hw::SteadyTime::InfiniteFuture(),
                Collective collective = Collective::kNop) {
    const size_t index = Queue(rank, std::move(moves), slots, deadline, collective);
    dmp_.Serve(UINT64_MAX);  // every scheduled unit
    return index;
  }

  /// Submit without serving, for `tenant`.
  size_t Queue(uint32_t rank, std::vector<Move> moves, std::array<std::vector<int32_t>*, 3> slots,
               hw::SteadyTime deadline, Collective collective, uint32_t tenant = 0,
               absl::Status withdrawn = absl::OkStatus()) {
    auto call = std::make_unique<CallState>();
    call->id = next_id_++;
    call->withdrawn = std::move(withdrawn);
    call->desc.tenant = tenant;
    call->desc.collective = collective;
    call->desc.rank = rank;
    call->desc.datatype = DataType::kInt32;
    call->program.algorithm = "handmade";
    call->program.moves = std::move(moves);
    for (int i = 0; i < 3; ++i) {
      if (slots[i] != nullptr) {
        call->buffers.views[i] = {reinterpret_cast<std::byte*>(slots[i]->data()),
                                  slots[i]->size() * 4};
      }
    }
    call->deadline = deadline;
    const size_t index = done_.size();
    done_.emplace_back();
    call->done = [this, index](Completion completion) { done_[index] = std::move(completion); };
    call->comm = &comm_;
    dmp_.Submit(std::move(call));
    return index;
  }

  static Move Copy(Endpoint from, Endpoint to, uint64_t count) {
    return {.op0 = from, .result = to, .count = count};
  }

  Communicator comm_;
  Counters counters_;
  uint64_t next_id_ = 1;
  std::vector<std::optional<Completion>> done_;
  // A single rx buffer; no peers, so no clear-to-sends.
  Rbm rbm_{kSegment,
           kSegment,
           kSegment,
           /*max_waiting_requests=*/1,
           /*local_credits=*/8,
           [](const MessageKey&, uint64_t) {},
           [this](const CommId&, std::function<void()> piece) { dmp_.Defer(0, std::move(piece)); }};
  Dmp dmp_{rbm_,
           kSegment,
           kSegment,
           ScratchPool::kDefaultLimitBytes,
           counters_,
           Dmp::Hooks{.link_for = [](Communicator&, uint32_t) { return nullptr; },
                      .fail = [this](Communicator& comm,
                                     absl::Status status) { dmp_.FailCalls(comm, status); },
                      .invalid = [this](Communicator& comm, uint32_t,
                                        absl::Status status) { dmp_.FailCalls(comm, status); },
                      .wake = [] {}}};  // the tests Serve themselves
};

TEST_F(DmpTest, ReducesIntoTheNetworkAndDiscardsOnRequest) {
  std::vector<int32_t> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(4), ignored = {7, 7, 7, 7};
  const size_t sender = Submit(0,
                               {{.op0 = Endpoint::Memory(Slot::kOp0, 0),
                                 .op1 = Endpoint::Memory(Slot::kOp1, 0),
                                 .result = Endpoint::Network(1, 9),
                                 .function = Function::kReduce,
                                 .count = 4},
                                Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(1, 10), 4)},
                               {&a, &b, nullptr});
  const size_t receiver =
      Submit(1,
             {Copy(Endpoint::Network(0, 10), Endpoint::None(), 4),
              Copy(Endpoint::Network(0, 9), Endpoint::Memory(Slot::kResult, 0), 4)},
             {nullptr, nullptr, &out});
  ASSERT_TRUE(done_[sender] && done_[receiver]);
  EXPECT_TRUE(done_[sender]->status.ok()) << done_[sender]->status;
  EXPECT_TRUE(done_[receiver]->status.ok()) << done_[receiver]->status;
  EXPECT_EQ(done_[sender]->bytes_sent, 32u);
  EXPECT_EQ(done_[sender]->algorithm, "handmade");
  EXPECT_EQ(out, (std::vector<int32_t>{11, 22, 33, 44}));
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

TEST_F(DmpTest, LocalSendsGoEagerWhileABufferIsFreeElseWaitForTheirReceive) {
  const Move send = Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(1, 1), 1000);
  const Move receive = Copy(Endpoint::Network(0, 1), Endpoint::Memory(Slot::kResult, 0), 1000);
  std::vector<int32_t> first(1000, 1), second(1000, 2), large(3 * kSegment / 4, 3);
  // The first small message takes the only buffer; the second waits for its receive.
  const size_t a = Submit(0, {send}, {&first, nullptr, nullptr});
  ASSERT_TRUE(done_[a]);
  EXPECT_EQ(rbm_.used_bytes(), kSegment);
  const size_t b = Submit(0, {send}, {&second, nullptr, nullptr});
  EXPECT_FALSE(done_[b]);
  EXPECT_EQ(counters_.eager_messages.load(), 1u);
  EXPECT_EQ(counters_.eager_fallbacks.load(), 1u);
  std::vector<int32_t> out_a(1000), out_b(1000), out_large(large.size());
  Submit(1, {receive}, {nullptr, nullptr, &out_a});
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  const size_t rb = Submit(1, {receive}, {nullptr, nullptr, &out_b});
  ASSERT_TRUE(done_[b] && done_[rb]);
  EXPECT_EQ(out_a, first);
  EXPECT_EQ(out_b, second);
  // Larger than eager: the sender waits for the receive even with buffers free.
  const size_t c =
      Submit(0, {Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(1, 1), large.size())},
             {&large, nullptr, nullptr});
  EXPECT_FALSE(done_[c]);
  const size_t rc =
      Submit(1, {Copy(Endpoint::Network(0, 1), Endpoint::Memory(Slot::kResult, 0), large.size())},
             {nullptr, nullptr, &out_large});
  ASSERT_TRUE(done_[c] && done_[rc]);
  EXPECT_TRUE(done_[c]->status.ok());
  EXPECT_EQ(out_large, large);
  EXPECT_EQ(counters_.eager_messages.load(), 1u);
  EXPECT_EQ(counters_.rendezvous_messages.load(), 2u);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

TEST_F(DmpTest, LocalRendezvousReducesStraightIntoTheResult) {
  std::vector<int32_t> mine(3 * kSegment / 4), theirs(mine.size()), out(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    mine[i] = static_cast<int32_t>(i);
    theirs[i] = static_cast<int32_t>(7 * i);
  }
  const size_t receiver = Submit(1,
                                 {{.op0 = Endpoint::Network(0, 1),
                                   .op1 = Endpoint::Memory(Slot::kOp0, 0),
                                   .result = Endpoint::Memory(Slot::kResult, 0),
                                   .function = Function::kReduce,
                                   .count = mine.size()}},
                                 {&mine, nullptr, &out});
  const size_t sender =
      Submit(0, {Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(1, 1), theirs.size())},
             {&theirs, nullptr, nullptr});
  ASSERT_TRUE(done_[sender] && done_[receiver]);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<int32_t>(8 * i)) << i;
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

// While tenants share the engine, a local message of four units is applied a unit per
// turn of its tenant: another tenant's unit queued after it runs before it is whole.
TEST_F(DmpTest, ALocalMessageTakesTurnsWithOtherTenants) {
  rbm_.SetPieceBytes(kSegment);  // as the engine does while tenants share it
  std::vector<int32_t> data(kSegment), out(kSegment), mine(kSegment / 4, 5), copied(kSegment / 4);
  std::iota(data.begin(), data.end(), 1);
  const uint64_t count = data.size();
  const size_t receiver =
      Queue(1, {Copy(Endpoint::Network(0, 1), Endpoint::Memory(Slot::kResult, 0), count)},
            {nullptr, nullptr, &out}, hw::SteadyTime::InfiniteFuture(), Collective::kRecv);
  const size_t sender =
      Queue(0, {Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(1, 1), count)},
            {&data, nullptr, nullptr}, hw::SteadyTime::InfiniteFuture(), Collective::kSend);
  EXPECT_FALSE(done_[receiver] || done_[sender]);  // one unit applied of four
  const size_t other = Queue(
      0, {Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Memory(Slot::kResult, 0), mine.size())},
      {&mine, nullptr, &copied}, hw::SteadyTime::InfiniteFuture(), Collective::kSend, 1);
  dmp_.Serve(2 * kSegment);  // a unit of each tenant
  EXPECT_TRUE(done_[other]);
  EXPECT_EQ(copied, mine);
  EXPECT_FALSE(done_[receiver]);
  dmp_.Serve(UINT64_MAX);
  ASSERT_TRUE(done_[receiver] && done_[sender]);
  EXPECT_EQ(out, data);
}

// A withdrawn call takes its messages' sequence numbers and ends at once with its reason,
// moving nothing and counted neither completed nor failed: the call after it meets the
// receive meant for it, and the receive meant for the withdrawn one gets nothing.
TEST_F(DmpTest, AWithdrawnCallTakesItsPlaceAndMovesNothing) {
  std::vector<int32_t> x = {1}, y = {2}, first_out = {-1}, second_out = {-1};
  const Move receive = Copy(Endpoint::Network(0, 1), Endpoint::Memory(Slot::kResult, 0), 1);
  const Move send = Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(1, 1), 1);
  // Receives, so that the second runs beside the first, which waits for nothing to come.
  const size_t first = Submit(1, {receive}, {nullptr, nullptr, &first_out},
                              hw::SteadyTime::InfiniteFuture(), Collective::kRecv);
  const size_t second = Submit(1, {receive}, {nullptr, nullptr, &second_out},
                               hw::SteadyTime::InfiniteFuture(), Collective::kRecv);
  const size_t withdrawn =
      Queue(0, {send}, {&x, nullptr, nullptr}, hw::SteadyTime::InfiniteFuture(), Collective::kSend,
            0, absl::CancelledError("withdrawn"));
  dmp_.Serve(UINT64_MAX);
  ASSERT_TRUE(done_[withdrawn]);
  EXPECT_EQ(done_[withdrawn]->status, absl::CancelledError("withdrawn"));
  Submit(0, {send}, {&y, nullptr, nullptr}, hw::SteadyTime::InfiniteFuture(), Collective::kSend);
  ASSERT_TRUE(done_[second]);
  EXPECT_TRUE(done_[second]->status.ok()) << done_[second]->status;
  EXPECT_EQ(second_out[0], 2);
  EXPECT_FALSE(done_[first]);
  EXPECT_EQ(first_out[0], -1);
  EXPECT_EQ(counters_.calls_completed.load(), 2u);  // the second send and receive
  EXPECT_EQ(counters_.calls_failed.load(), 0u);
}

TEST_F(DmpTest, FailCallsEndsRunningAndQueuedCalls) {
  std::vector<int32_t> out(4);
  const Move wait = Copy(Endpoint::Network(0, 1), Endpoint::Memory(Slot::kResult, 0), 4);
  const hw::SteadyTime soon = hw::SteadyTime() + absl::Seconds(1000);
  const size_t first = Submit(1, {wait}, {nullptr, nullptr, &out}, soon);
  const size_t second = Submit(1, {wait}, {nullptr, nullptr, &out});
  EXPECT_FALSE(done_[first] || done_[second]);
  EXPECT_EQ(dmp_.NextDeadline(), soon);
  EXPECT_EQ(dmp_.Expired(soon - absl::Seconds(1)), nullptr);
  const CallState* expired = dmp_.Expired(soon);
  ASSERT_NE(expired, nullptr);
  dmp_.FailCalls(comm_, absl::UnavailableError("broken"), expired->id,
                 absl::DeadlineExceededError("late"));
  ASSERT_TRUE(done_[first] && done_[second]);
  EXPECT_EQ(done_[first]->status, absl::DeadlineExceededError("late"));
  EXPECT_EQ(done_[second]->status, absl::UnavailableError("broken"));
  EXPECT_EQ(dmp_.NextDeadline(), hw::SteadyTime::InfiniteFuture());
  EXPECT_EQ(counters_.calls_failed.load(), 2u);
}

TEST_F(DmpTest, CallsOfOneRankRunOneAtATime) {
  std::vector<int32_t> x = {1}, y = {2}, first_out(1), second_out(1);
  const Move receive = Copy(Endpoint::Network(0, 1), Endpoint::Memory(Slot::kResult, 0), 1);
  const size_t r1 = Submit(1, {receive}, {nullptr, nullptr, &first_out});
  const size_t r2 = Submit(1, {receive}, {nullptr, nullptr, &second_out});
  const Move send = Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(1, 1), 1);
  Submit(0, {send}, {&x, nullptr, nullptr});
  ASSERT_TRUE(done_[r1]);
  EXPECT_FALSE(done_[r2]);
  Submit(0, {send}, {&y, nullptr, nullptr});
  ASSERT_TRUE(done_[r2]);
  EXPECT_EQ(first_out[0], 1);
  EXPECT_EQ(second_out[0], 2);
}

TEST_F(DmpTest, RunningSaysWhatEachStartedCallWaitsFor) {
  EXPECT_EQ(dmp_.Running(comm_), "none");
  // Rank 0 sends a message past the eager limit that no receive takes; rank 1 posts ten
  // receives side by side, each into its own buffer, for messages nobody sends.
  std::vector<int32_t> large(3 * kSegment / 4, 3);
  Submit(0, {Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(1, 2), large.size())},
         {&large, nullptr, nullptr}, hw::SteadyTime::InfiniteFuture(), Collective::kSend);
  std::vector<std::vector<int32_t>> outs(10, std::vector<int32_t>(1));
  for (std::vector<int32_t>& out : outs) {
    Submit(1, {Copy(Endpoint::Network(0, 1), Endpoint::Memory(Slot::kResult, 0), 1)},
           {nullptr, nullptr, &out}, hw::SteadyTime::InfiniteFuture(), Collective::kRecv);
  }
  std::string expected =
      "send on rank 0: 0 of 1 moves done; move 0: send to rank 1 (tag 2, "
      "message 0): local, 0 of 12288 bytes arrived, 0 applied";
  for (int message = 0; message < 7; ++message) {
    absl::StrAppend(&expected,
                    " | recv on rank 1: 0 of 1 moves done; move 0: receive from rank 0 "
                    "(tag 1, message ",
                    message, "): nothing arrived");
  }
  EXPECT_EQ(dmp_.Running(comm_), expected + " | and 3 more");
  // A collective of rank 1 waits behind its ten receives, and says so past its deadline.
  std::vector<int32_t> in = {1}, out(1);
  const hw::SteadyTime soon = hw::SteadyNow() + absl::Seconds(1);
  Submit(1, {Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Memory(Slot::kResult, 0), 1)},
         {&in, nullptr, &out}, soon, Collective::kAllreduce);
  const CallState* late = dmp_.Expired(soon);
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(dmp_.Waiting(*late), "it has not started: it waits behind 10 earlier calls of rank 1");
}

}  // namespace
}  // namespace cclo::hw::emu
