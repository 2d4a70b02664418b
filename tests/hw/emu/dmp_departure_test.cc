// The DMP when ranks leave, driven by hand: rank 0 is local, ranks 1 and 2 sit behind fake
// sessions whose queued segments the test writes when it likes, and arrivals go through
// the RBM as the device would land them. A rank leaves as EmuDevice does it: marked
// departed, its session closed, its unfinished messages dropped, then Dmp::Depart.
// Messages of up to 4 ints go eagerly; longer ones by rendezvous. Also what a running
// rendezvous send says it waits for, step by step.
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/clock.h"
#include "hw/emu/dmp.h"

namespace cclo::hw::emu {
namespace {

constexpr uint64_t kSegment = 4096;

/// A session that only queues: the test runs the on_written callbacks.
class FakeSession final : public poe::Session {
 public:
  explicit FakeSession(std::string address) : address_(std::move(address)) {}
  const CommId& comm() const override { return comm_; }
  const std::string& peer_address() const override { return address_; }
  uint64_t segment_bytes() const override { return kSegment; }
  uint64_t eager_bytes() const override { return kSegment; }
  void Admit() override {}
  void Send(const poe::SegmentHeader& header, const std::byte* payload,
            std::function<void()> on_written) override {
    sent.push_back(header);
    payloads.push_back(payload);
    if (on_written) queued.push_back(std::move(on_written));
  }
  void Depart(uint32_t, const absl::Status&) override {}
  void Close(const absl::Status&, poe::ByeKind) override { queued.clear(); }

  std::vector<poe::SegmentHeader> sent;
  std::vector<const std::byte*> payloads;     ///< read when "written", as a real session does
  std::vector<std::function<void()>> queued;  ///< on_written of segments not yet written

 private:
  CommId comm_{};
  std::string address_;
};

class DmpDepartureTest : public ::testing::Test {
 protected:
  DmpDepartureTest() {
    comm_.id = CommId{5};
    comm_.ranks = {{"here:1"}, {"one:1"}, {"two:1"}};
    comm_.local = {true, false, false};
    comm_.ready = true;
    for (PeerLink* link : {&link_one_, &link_two_}) {
      link->state = LinkState::kUp;
      link->eager_bytes = 16;
      link->send_credits = 8;
      link->segment_bytes = kSegment;
    }
    link_one_.tx = &one_;
    link_two_.tx = &two_;
    account_ = rbm_.OpenAccount(4).account;
  }

  /// Submits a call of rank 0 with int32 elements and serves up to `budget` bytes of
  /// scheduled units; returns its slot in done_.
  size_t Submit(std::vector<Move> moves, std::vector<int32_t>* op0, std::vector<int32_t>* result,
                uint64_t budget = UINT64_MAX) {
    auto call = std::make_unique<CallState>();
    call->id = next_id_++;
    call->desc.rank = 0;
    call->desc.datatype = DataType::kInt32;
    call->program.moves = std::move(moves);
    if (op0 != nullptr) call->buffers.views[0] = {Bytes(*op0), op0->size() * 4};
    if (result != nullptr) call->buffers.views[2] = {Bytes(*result), result->size() * 4};
    call->deadline = hw::SteadyTime::InfiniteFuture();
    const size_t index = done_.size();
    done_.emplace_back();
    call->done = [this, index](Completion completion) { done_[index] = std::move(completion); };
    call->comm = &comm_;
    dmp_.Submit(std::move(call));
    dmp_.Serve(budget);
    return index;
  }

  /// The whole message `data` from `src` to rank 0 arrives, as the device lands it.
  void Arrive(uint32_t src, uint32_t tag, uint64_t sequence, std::vector<int32_t> data) {
    poe::SegmentHeader header{.type = poe::SegmentType::kEagerData,
                              .comm = comm_.id,
                              .src = src,
                              .dst = 0,
                              .tag = tag,
                              .length = static_cast<uint32_t>(data.size() * 4),
                              .sequence = sequence,
                              .total = data.size() * 4};
    absl::StatusOr<std::byte*> landing = rbm_.Land(header, scratch_.data(), account_);
    ASSERT_TRUE(landing.ok()) << landing.status();
    std::memcpy(*landing, data.data(), header.length);
    ASSERT_TRUE(rbm_.Landed(header).ok());
    dmp_.Serve(UINT64_MAX);  // every scheduled unit
  }

  /// What a test does not expect: data reported invalid.
  void TearDown() override {
    for (const auto& [source, status] : invalid_) {
      ADD_FAILURE() << "invalid from rank " << source << ": " << status;
    }
  }

  void Depart(uint32_t rank) {
    comm_.departed[rank] = absl::UnavailableError(absl::StrCat("rank ", rank, " left"));
    (rank == 1 ? one_ : two_).Close(comm_.departed[rank], poe::ByeKind::kLeft);
    rbm_.DropUnfinished(comm_.id, {rank});
    dmp_.Depart(comm_);
    dmp_.Serve(UINT64_MAX);  // every scheduled unit
  }

  static std::byte* Bytes(std::vector<int32_t>& v) {
    return reinterpret_cast<std::byte*>(v.data());
  }
  static Move Copy(Endpoint from, Endpoint to, uint64_t count) {
    return {.op0 = from, .result = to, .count = count};
  }
  static Endpoint Mem(Slot slot) { return Endpoint::Memory(slot, 0); }

  Communicator comm_;
  Counters counters_;
  uint64_t next_id_ = 1;
  std::vector<std::optional<Completion>> done_;
  std::vector<std::byte> scratch_ = std::vector<std::byte>(kSegment);
  FakeSession one_{"one:1"}, two_{"two:1"};
  PeerLink link_one_, link_two_;
  uint64_t account_ = 0;  ///< the credits ranks 1 and 2 send eager messages on
  std::vector<MessageKey> cleared_;
  std::vector<std::pair<uint32_t, absl::Status>> invalid_;  ///< hooks.invalid: source, problem
  Rbm rbm_{4 * kSegment,
           kSegment,
           kSegment,
           /*max_waiting_requests=*/4,
           /*local_credits=*/8,
           [this](const MessageKey& key, uint64_t) { cleared_.push_back(key); },
           [this](const CommId&, std::function<void()> piece) { dmp_.Defer(0, std::move(piece)); }};
  Dmp dmp_{rbm_,
           kSegment,
           kSegment,
           ScratchPool::kDefaultLimitBytes,
           counters_,
           Dmp::Hooks{.link_for = [this](Communicator& comm, uint32_t rank) -> PeerLink* {
                        if (comm.departed.contains(rank)) return nullptr;
                        return rank == 1 ? &link_one_ : rank == 2 ? &link_two_ : nullptr;
                      },
                      .fail = [](Communicator&,
                                 absl::Status status) { ADD_FAILURE() << "broken: " << status; },
                      .invalid =
                          [this](Communicator&, uint32_t source, absl::Status status) {
                            invalid_.push_back({source, status});
                          },
                      .wake = [] {}}};  // the tests Serve themselves
};

TEST_F(DmpDepartureTest, FailingCallWaitsForItsSegmentsInFlightThenTheNextRuns) {
  std::vector<int32_t> data = {1, 2, 3, 4}, out(4), later(4);
  const size_t first = Submit({Copy(Mem(Slot::kOp0), Endpoint::Network(1, 1), 4),
                               Copy(Endpoint::Network(2, 1), Mem(Slot::kResult), 4)},
                              &data, &out);
  const size_t second =
      Submit({Copy(Endpoint::Network(1, 2), Mem(Slot::kResult), 4)}, nullptr, &later);
  ASSERT_EQ(one_.queued.size(), 1u);
  Depart(2);
  // The send to rank 1 still reads `data`: the call must not complete before it is written.
  EXPECT_FALSE(done_[first]);
  std::exchange(one_.queued, {})[0]();
  ASSERT_TRUE(done_[first]);
  EXPECT_EQ(done_[first]->status, absl::UnavailableError("rank 2 left"));
  EXPECT_FALSE(done_[second]);  // it runs now, needing only rank 1
  Arrive(1, 2, 0, {5, 6, 7, 8});
  ASSERT_TRUE(done_[second]);
  EXPECT_TRUE(done_[second]->status.ok()) << done_[second]->status;
  EXPECT_EQ(later, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(counters_.calls_failed.load(), 1u);
}

TEST_F(DmpDepartureTest, FailingCallGivesUpItsOtherReceives) {
  std::vector<int32_t> data = {1, 2, 3, 4}, out = {-1, -1, -1, -1};
  const size_t call = Submit({Copy(Endpoint::Network(1, 1), Mem(Slot::kResult), 4),
                              Copy(Mem(Slot::kOp0), Endpoint::Network(2, 1), 4)},
                             &data, &out);
  Depart(2);  // the send to rank 2 went with its session
  ASSERT_TRUE(done_[call]);
  EXPECT_EQ(done_[call]->status, absl::UnavailableError("rank 2 left"));
  Arrive(1, 1, 0, {9, 9, 9, 9});  // rank 1 sends anyway: discarded
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

class LandingTest : public DmpDepartureTest {
 protected:
  /// A call receiving 8 ints from rank 1 (by rendezvous) and sending to rank 2; the first
  /// half of its message from rank 1 is landing straight in `out_` when rank 2 leaves.
  size_t StartLanding() {
    const size_t call = Submit({Copy(Endpoint::Network(1, 1), Mem(Slot::kResult), 8),
                                Copy(Mem(Slot::kOp0), Endpoint::Network(2, 1), 1)},
                               &data_, &out_);
    poe::SegmentHeader request = half_;
    request.type = poe::SegmentType::kRequest;
    request.length = 0;
    EXPECT_TRUE(rbm_.Request(request, account_).ok());
    EXPECT_EQ(cleared_.size(), 1u);
    absl::StatusOr<std::byte*> landing = rbm_.Land(half_, scratch_.data(), account_);
    EXPECT_TRUE(landing.ok() && *landing == Bytes(out_));
    Depart(2);
    return call;
  }

  std::vector<int32_t> data_ = {1}, out_ = std::vector<int32_t>(8);
  const poe::SegmentHeader half_{.type = poe::SegmentType::kRendezvousData,
                                 .comm = CommId{5},
                                 .src = 1,
                                 .tag = 1,
                                 .length = 16,
                                 .total = 32};
};

TEST_F(LandingTest, GivenUpReceiveHoldsTheCallWhileASegmentLandsInItsMemory) {
  const size_t call = StartLanding();
  EXPECT_FALSE(done_[call]);
  ASSERT_TRUE(rbm_.Landed(half_).ok());
  dmp_.Serve(UINT64_MAX);  // every scheduled unit
  ASSERT_TRUE(done_[call]);
  EXPECT_EQ(done_[call]->status, absl::UnavailableError("rank 2 left"));
}

TEST_F(LandingTest, GivenUpReceiveWhoseSenderLeavesToo) {
  const size_t call = StartLanding();
  EXPECT_FALSE(done_[call]);
  Depart(1);  // its session, and the landing, end
  ASSERT_TRUE(done_[call]);
  EXPECT_EQ(done_[call]->status, absl::UnavailableError("rank 2 left"));
}

TEST_F(DmpDepartureTest, WholeStagedMessagesOfADepartedRankAreStillReceived) {
  Arrive(2, 1, 0, {1, 2, 3, 4});
  // The next message was only announced (rendezvous): it can no longer come.
  ASSERT_TRUE(rbm_.Request({.type = poe::SegmentType::kRequest,
                            .comm = comm_.id,
                            .src = 2,
                            .tag = 1,
                            .sequence = 1,
                            .total = 16},
                           account_)
                  .ok());
  EXPECT_EQ(rbm_.used_bytes(), kSegment);
  Depart(2);
  EXPECT_EQ(rbm_.used_bytes(), kSegment);  // the whole message stays

  std::vector<int32_t> out(4), more(4), data = {7};
  const Move receive = Copy(Endpoint::Network(2, 1), Mem(Slot::kResult), 4);
  const size_t whole = Submit({receive}, nullptr, &out);
  const size_t unfinished = Submit({receive}, nullptr, &more);
  const size_t send = Submit({Copy(Mem(Slot::kOp0), Endpoint::Network(2, 1), 1)}, &data, nullptr);
  ASSERT_TRUE(done_[whole] && done_[unfinished] && done_[send]);
  EXPECT_TRUE(done_[whole]->status.ok()) << done_[whole]->status;
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(done_[unfinished]->status, absl::UnavailableError("rank 2 left"));
  EXPECT_EQ(done_[send]->status, absl::UnavailableError("rank 2 left"));
  EXPECT_TRUE(two_.queued.empty());
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

TEST_F(DmpDepartureTest, RendezvousSendWaitingForALeftRankFailsWithItsReason) {
  std::vector<int32_t> data(100, 7);
  const size_t call =
      Submit({Copy(Mem(Slot::kOp0), Endpoint::Network(2, 1), data.size())}, &data, nullptr);
  ASSERT_EQ(two_.sent.size(), 1u);
  EXPECT_EQ(two_.sent[0].type, poe::SegmentType::kRequest);
  EXPECT_EQ(two_.sent[0].total, 400u);
  EXPECT_FALSE(done_[call]);  // waits for the clear-to-send
  Depart(2);
  ASSERT_TRUE(done_[call]);
  EXPECT_EQ(done_[call]->status, absl::UnavailableError("rank 2 left"));
  EXPECT_EQ(counters_.rendezvous_messages.load(), 1u);
}

TEST_F(DmpDepartureTest, ClearToSendStreamsTheDataAndUnknownOnesAreRejected) {
  std::vector<int32_t> data(3000, 7);  // 12000 bytes: three segments
  const size_t call =
      Submit({Copy(Mem(Slot::kOp0), Endpoint::Network(1, 1), data.size())}, &data, nullptr);
  poe::SegmentHeader clear = one_.sent.at(0);
  clear.type = poe::SegmentType::kClearToSend;
  poe::SegmentHeader wrong = clear;
  wrong.total = 4;
  EXPECT_THAT(std::string(dmp_.ClearToSend(comm_, wrong).message()),
              ::testing::HasSubstr("clear-to-send for 4 bytes of the message from rank 0 to "
                                   "rank 1 (tag 1, sequence 0)"));
  ASSERT_TRUE(dmp_.ClearToSend(comm_, clear).ok());
  dmp_.Serve(UINT64_MAX);
  ASSERT_EQ(one_.sent.size(), 4u);
  for (int k = 1; k <= 3; ++k) {
    EXPECT_EQ(one_.sent[k].type, poe::SegmentType::kRendezvousData);
    EXPECT_EQ(one_.sent[k].offset, (k - 1) * kSegment);
  }
  EXPECT_EQ(one_.sent[3].length, 12000 - 2 * kSegment);
  EXPECT_EQ(dmp_.ClearToSend(comm_, clear).code(), absl::StatusCode::kInvalidArgument);
  for (auto& written : std::exchange(one_.queued, {})) written();
  ASSERT_TRUE(done_[call]);
  EXPECT_TRUE(done_[call]->status.ok());
}

TEST_F(DmpDepartureTest, ARendezvousSendSaysHowFarItCame) {
  std::vector<int32_t> data(3000, 7);  // 12000 bytes: three segments
  Submit({Copy(Mem(Slot::kOp0), Endpoint::Network(1, 1), data.size())}, &data, nullptr);
  const std::string send =
      "nop on rank 0: 0 of 1 moves done; move 0: send to rank 1 (tag 1, message 0): ";
  EXPECT_EQ(dmp_.Running(comm_), send + "its request not yet written");
  std::exchange(one_.queued, {})[0]();  // the session wrote the request
  EXPECT_EQ(dmp_.Running(comm_), send + "asked, waiting for its clear-to-send");
  poe::SegmentHeader clear = one_.sent.at(0);
  clear.type = poe::SegmentType::kClearToSend;
  ASSERT_TRUE(dmp_.ClearToSend(comm_, clear).ok());
  dmp_.Serve(UINT64_MAX);
  EXPECT_EQ(dmp_.Running(comm_), send + "3 segments not yet written");
  std::vector<std::function<void()>> written = std::exchange(one_.queued, {});
  ASSERT_EQ(written.size(), 3u);
  written[0]();
  EXPECT_EQ(dmp_.Running(comm_), send + "2 segments not yet written");
  written[1]();
  written[2]();
  EXPECT_EQ(dmp_.Running(comm_), "none");
}

TEST_F(DmpDepartureTest, FailingCallLetsGoOfItsRendezvousSendsButTheirDataStillGoes) {
  std::vector<int32_t> data(100), out(4);
  for (int i = 0; i < 100; ++i) data[i] = i;
  const size_t call = Submit({Copy(Mem(Slot::kOp0), Endpoint::Network(1, 1), data.size()),
                              Copy(Endpoint::Network(2, 1), Mem(Slot::kResult), 4)},
                             &data, &out);
  Depart(2);
  ASSERT_TRUE(done_[call]);  // no need to wait for rank 1's receive
  EXPECT_EQ(done_[call]->status, absl::UnavailableError("rank 2 left"));
  const std::vector<int32_t> expected = data;
  data.assign(100, -1);  // the call's memory is the tenant's again
  poe::SegmentHeader clear = one_.sent.at(0);
  clear.type = poe::SegmentType::kClearToSend;
  ASSERT_TRUE(dmp_.ClearToSend(comm_, clear).ok());
  ASSERT_EQ(one_.sent.size(), 2u);
  EXPECT_EQ(one_.sent[1].type, poe::SegmentType::kRendezvousData);
  ASSERT_EQ(one_.sent[1].length, 400u);
  std::vector<int32_t> payload(100);
  std::memcpy(payload.data(), one_.payloads[1], 400);
  EXPECT_EQ(payload, expected);
  for (auto& written : std::exchange(one_.queued, {})) written();
}

// The same when the request had not left yet: it waited in the scheduler, which runs
// nothing of a finished call, so letting go sends it.
TEST_F(DmpDepartureTest, ARendezvousSendLetGoBeforeItsRequestLeftStillAsks) {
  std::vector<int32_t> data(100, 3), out(4);
  const size_t call = Submit({Copy(Mem(Slot::kOp0), Endpoint::Network(1, 1), data.size()),
                              Copy(Endpoint::Network(2, 1), Mem(Slot::kResult), 4)},
                             &data, &out, /*budget=*/0);
  EXPECT_TRUE(one_.sent.empty());  // the request is still a scheduled unit
  Depart(2);
  ASSERT_TRUE(done_[call]);
  EXPECT_EQ(done_[call]->status, absl::UnavailableError("rank 2 left"));
  ASSERT_EQ(one_.sent.size(), 1u);
  EXPECT_EQ(one_.sent[0].type, poe::SegmentType::kRequest);
  EXPECT_EQ(one_.sent[0].total, 400u);
  poe::SegmentHeader clear = one_.sent[0];
  clear.type = poe::SegmentType::kClearToSend;
  ASSERT_TRUE(dmp_.ClearToSend(comm_, clear).ok());
  dmp_.Serve(UINT64_MAX);
  ASSERT_EQ(one_.sent.size(), 2u);  // once: the scheduled unit did not ask again
  EXPECT_EQ(one_.sent[1].type, poe::SegmentType::kRendezvousData);
  for (auto& written : std::exchange(one_.queued, {})) written();
}

// A call that fails before it starts some receives still used up their sequence numbers:
// what comes for them is received into nothing, so no pool buffer stays taken, a
// rendezvous sender is cleared, and later calls match their own messages.
TEST_F(DmpDepartureTest, MessagesForReceivesAFailingCallNeverStartedAreDiscarded) {
  Depart(2);
  std::vector<int32_t> out = {-1, -1, -1, -1}, big(100, -1);
  const size_t failed = Submit({Copy(Endpoint::Network(2, 1), Mem(Slot::kResult), 4),
                                Copy(Endpoint::Network(1, 1), Mem(Slot::kResult), 4),
                                Copy(Endpoint::Network(1, 2), Mem(Slot::kResult), 100)},
                               nullptr, &out);
  ASSERT_TRUE(done_[failed]);
  EXPECT_EQ(done_[failed]->status, absl::UnavailableError("rank 2 left"));
  Arrive(1, 1, 0, {9, 9, 9, 9});
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  const poe::SegmentHeader request{
      .type = poe::SegmentType::kRequest, .comm = comm_.id, .src = 1, .tag = 2, .total = 400};
  ASSERT_TRUE(rbm_.Request(request, account_).ok());
  EXPECT_THAT(cleared_, ::testing::ElementsAre(MessageKey::Of(request)));
  const size_t next = Submit({Copy(Endpoint::Network(1, 1), Mem(Slot::kResult), 4)}, nullptr, &out);
  Arrive(1, 1, 1, {5, 6, 7, 8});
  ASSERT_TRUE(done_[next]);
  EXPECT_TRUE(done_[next]->status.ok()) << done_[next]->status;
  EXPECT_EQ(out, (std::vector<int32_t>{5, 6, 7, 8}));
}

// A message already staged that does not fit a receive the failing call never started is
// invalid data from its sender, as it is for a started receive: the device then breaks the
// communicator and frees it, instead of keeping it staged until the communicator goes.
TEST_F(DmpDepartureTest, AMessageThatDoesNotFitAReceiveNeverStartedIsInvalid) {
  Arrive(1, 1, 0, {9, 9, 9, 9});
  Depart(2);
  std::vector<int32_t> out = {-1, -1};
  const size_t failed = Submit({Copy(Endpoint::Network(2, 1), Mem(Slot::kResult), 2),
                                Copy(Endpoint::Network(1, 1), Mem(Slot::kResult), 2)},
                               nullptr, &out);
  ASSERT_EQ(invalid_.size(), 1u);
  const auto [source, problem] = std::exchange(invalid_, {})[0];
  EXPECT_EQ(source, 1u);
  EXPECT_EQ(problem,
            absl::InvalidArgumentError("message from rank 1 to rank 0 (tag 1, sequence "
                                       "0): has 16 bytes but the posted receive expects 8"));
  // Had nothing broken the communicator, the call fails for the rank that left.
  ASSERT_TRUE(done_[failed]);
  EXPECT_EQ(done_[failed]->status, absl::UnavailableError("rank 2 left"));
  EXPECT_EQ(out, (std::vector<int32_t>{-1, -1}));
}

}  // namespace
}  // namespace cclo::hw::emu
