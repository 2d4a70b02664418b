#include "hw/emu/rbm.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cclo::hw::emu {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kEager = 4096;    ///< eager limit and pool buffer size
constexpr uint64_t kSegment = 8192;  ///< rendezvous segment size
constexpr uint64_t kBuffers = 4;
constexpr uint64_t kWaiting = 3;  ///< rendezvous requests a link may have waiting
constexpr uint32_t kLocalCredits = 2;  ///< local messages a communicator may have staged

using poe::SegmentType;

poe::SegmentHeader Segment(SegmentType type, uint64_t offset, uint32_t length, uint64_t total,
                           uint64_t sequence = 0) {
  return {.type = type,
          .comm = CommId{7},
          .src = 1,
          .dst = 0,
          .tag = 5,
          .length = length,
          .sequence = sequence,
          .offset = offset,
          .total = total};
}

MessageKey Key(uint64_t sequence = 0) { return {CommId{7}, 1, 0, 5, sequence}; }

std::vector<std::byte> Pattern(size_t size) {
  std::vector<std::byte> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = std::byte(i * 7 + 1);
  return data;
}

class RbmTest : public ::testing::Test {
 protected:
  RbmTest() {
    account_ = rbm_.OpenAccount(2).account;
    rbm_.SetPieceBytes(kSegment);
  }

  /// Lands `segment`, its payload read from `data` at the segment's offset.
  absl::Status Arrive(const poe::SegmentHeader& segment, const std::byte* data) {
    absl::StatusOr<std::byte*> landing = rbm_.Land(segment, scratch_.data(), account_);
    if (!landing.ok()) return landing.status();
    if (segment.length > 0) std::memcpy(*landing, data + segment.offset, segment.length);
    return rbm_.Landed(segment);
  }
  absl::Status Eager(const std::vector<std::byte>& data, uint64_t sequence = 0) {
    return Arrive(Segment(SegmentType::kEagerData, 0, data.size(), data.size(), sequence),
                  data.data());
  }

  /// Runs the deferred pieces of local messages, and those they defer in turn.
  void RunDeferred() {
    while (!deferred_.empty()) RunOnePiece();
  }
  void RunOnePiece() {
    std::function<void()> piece = std::move(deferred_.front());
    deferred_.erase(deferred_.begin());
    piece();
  }

  RxTarget CopyInto(std::vector<std::byte>& out) {
    return {.bytes = out.size(), .result = out.data(), .on_complete = [this] { ++completed_; }};
  }
  /// Sums what arrives with `mine` into `result`.
  RxTarget SumInto(std::vector<int32_t>& result, const std::vector<int32_t>& mine) {
    return {.bytes = result.size() * sizeof(int32_t),
            .function = Function::kReduce,
            .result = reinterpret_cast<std::byte*>(result.data()),
            .memory_operand = reinterpret_cast<const std::byte*>(mine.data()),
            .datatype = DataType::kInt32,
            .on_complete = [this] { ++completed_; }};
  }

  int completed_ = 0;
  std::vector<std::pair<MessageKey, uint64_t>> cleared_;
  std::vector<std::function<void()>> deferred_;  ///< pieces of local messages, not yet run
  std::vector<std::byte> scratch_ = std::vector<std::byte>(kSegment);
  Rbm rbm_{kBuffers * kEager,
           kEager,
           kSegment,
           kWaiting,
           kLocalCredits,
           [this](const MessageKey& key, uint64_t total) {
             cleared_.push_back({key, total});
           },
           [this](const CommId&, std::function<void()> piece) {
             deferred_.push_back(std::move(piece));
           }};
  uint64_t account_ = 0;
};

TEST_F(RbmTest, PostedEagerMessageLandsInTheDestinationAndReturnsItsCredit) {
  const std::vector<std::byte> data = Pattern(100);
  std::vector<std::byte> out(100);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  const poe::SegmentHeader segment = Segment(SegmentType::kEagerData, 0, 100, 100);
  absl::StatusOr<std::byte*> landing = rbm_.Land(segment, scratch_.data(), account_);
  ASSERT_TRUE(landing.ok()) << landing.status();
  EXPECT_EQ(*landing, out.data());  // no staging
  std::memcpy(*landing, data.data(), 100);
  ASSERT_TRUE(rbm_.Landed(segment).ok());
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(out, data);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  EXPECT_EQ(rbm_.TakeCredits(), (std::vector<std::pair<uint64_t, uint32_t>>{{account_, 1}}));
}

TEST_F(RbmTest, EarlyEagerMessageIsStagedAndItsCreditReturnsWhenApplied) {
  const std::vector<std::byte> data = Pattern(kEager);
  ASSERT_TRUE(Eager(data).ok());
  EXPECT_EQ(rbm_.used_bytes(), kEager);
  EXPECT_TRUE(rbm_.Arrived(Key()));
  EXPECT_TRUE(rbm_.TakeCredits().empty());
  std::vector<std::byte> out(kEager);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(out, data);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  EXPECT_EQ(rbm_.TakeCredits(), (std::vector<std::pair<uint64_t, uint32_t>>{{account_, 1}}));
}

TEST_F(RbmTest, CreditsGoBackInBatchesOfHalfOrAtOnceWhenThePeerRunsShort) {
  Rbm rbm(
      16 * kEager, kEager, kSegment, kWaiting, kLocalCredits, [](const MessageKey&, uint64_t) {},
      [](const CommId&, std::function<void()>) {});
  const Rbm::Grant grant = rbm.OpenAccount(8);
  ASSERT_EQ(grant.credits, 8u);
  std::vector<std::byte> out(10);
  auto arrive = [&](uint64_t sequence, bool posted) {
    if (posted) ASSERT_TRUE(rbm.Post(Key(sequence), CopyInto(out)).ok());
    const poe::SegmentHeader segment = Segment(SegmentType::kEagerData, 0, 10, 10, sequence);
    ASSERT_TRUE(rbm.Land(segment, scratch_.data(), grant.account).ok());
    ASSERT_TRUE(rbm.Landed(segment).ok());
  };
  using Credits = std::vector<std::pair<uint64_t, uint32_t>>;
  // Applied one by one: nothing goes back until half of them (4) can.
  for (uint64_t sequence = 0; sequence < 4; ++sequence) {
    ASSERT_NO_FATAL_FAILURE(arrive(sequence, true));
    const Credits expected = sequence < 3 ? Credits{} : Credits{{grant.account, 4}};
    EXPECT_EQ(rbm.TakeCredits(), expected) << "after message " << sequence;
  }
  // Five wait for receives that never come: the peer holds 3, fewer than a batch, so the
  // next applied message's credit goes back at once.
  for (uint64_t sequence = 4; sequence < 9; ++sequence) {
    ASSERT_NO_FATAL_FAILURE(arrive(sequence, false));
  }
  EXPECT_TRUE(rbm.TakeCredits().empty());
  ASSERT_NO_FATAL_FAILURE(arrive(9, true));
  EXPECT_EQ(rbm.TakeCredits(), (Credits{{grant.account, 1}}));
  EXPECT_EQ(completed_, 5);
}

TEST_F(RbmTest, EagerBeyondTheCreditsOrTheLimitIsRejected) {
  ASSERT_TRUE(Eager(Pattern(10), 0).ok());
  ASSERT_TRUE(Eager(Pattern(10), 1).ok());
  absl::Status status = Eager(Pattern(10), 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("(tag 5, sequence 2)"));
  EXPECT_THAT(status.message(), HasSubstr("eager message beyond the 2 credits granted"));
  // Posting one receive returns one credit; once handed out it may be spent again.
  std::vector<std::byte> out(10);
  ASSERT_TRUE(rbm_.Post(Key(0), CopyInto(out)).ok());
  EXPECT_EQ(rbm_.TakeCredits().size(), 1u);
  EXPECT_TRUE(Eager(Pattern(10), 3).ok());
  EXPECT_THAT(Eager(Pattern(kEager + 8), 4).message(), HasSubstr("beyond the 2 credits"));

  const uint64_t other = rbm_.OpenAccount(1).account;
  const std::vector<std::byte> big = Pattern(kEager + 8);
  EXPECT_THAT(rbm_.Land(Segment(SegmentType::kEagerData, 0, big.size(), big.size(), 5),
                        scratch_.data(), other)
                  .status()
                  .message(),
              HasSubstr("eager message of 4104 bytes exceeds the eager limit of 4096"));
  EXPECT_THAT(rbm_.Land(Segment(SegmentType::kEagerData, 0, 8, 8, 3), scratch_.data(), other)
                  .status()
                  .message(),
              HasSubstr("eager message that was already announced"));
}

TEST_F(RbmTest, AccountsReserveOnlyWhatThePoolHas) {
  EXPECT_EQ(rbm_.reserved_bytes(), 2 * kEager);
  const Rbm::Grant second = rbm_.OpenAccount(5);  // two buffers are left
  EXPECT_EQ(second.credits, 2u);
  EXPECT_EQ(rbm_.reserved_bytes(), 4 * kEager);
  const uint64_t third = rbm_.OpenAccount(5).account;
  EXPECT_TRUE(rbm_.TakeCredits().empty());
  EXPECT_THAT(rbm_.Land(Segment(SegmentType::kEagerData, 0, 8, 8), scratch_.data(), third)
                  .status()
                  .message(),
              HasSubstr("beyond the 0 credits"));
  // A local eager message finds no unclaimed buffer and waits for its receive.
  const std::vector<std::byte> data = Pattern(64);
  int sent = 0;
  absl::StatusOr<bool> eager = rbm_.Deliver(Key(9), {}, data.data(), 64, true, [&] { ++sent; });
  ASSERT_TRUE(eager.ok());
  EXPECT_FALSE(*eager);
  EXPECT_EQ(sent, 0);
  // The third account, short of all it asked for, takes the buffers the second one freed.
  rbm_.CloseAccount(second.account);
  EXPECT_EQ(rbm_.reserved_bytes(), 4 * kEager);
  EXPECT_EQ(rbm_.TakeCredits(), (std::vector<std::pair<uint64_t, uint32_t>>{{third, 2}}));
  rbm_.CloseAccount(third);
  EXPECT_EQ(rbm_.reserved_bytes(), 2 * kEager);
  EXPECT_TRUE(*rbm_.Deliver(Key(10), {}, data.data(), 64, true, [&] { ++sent; }));
  EXPECT_EQ(sent, 1);
  EXPECT_EQ(rbm_.used_bytes(), kEager);
  rbm_.CloseAccount(account_);
  EXPECT_EQ(rbm_.reserved_bytes(), 0u);
}

// Local messages staged in the two buffers no account reserved leave none for a link that
// comes up meanwhile; once they are applied, the link gets the credits it was short of.
TEST_F(RbmTest, AnAccountShortOfCreditsGetsThemOnceBuffersAreFree) {
  const std::vector<std::byte> data = Pattern(64);
  for (uint64_t sequence = 0; sequence < 2; ++sequence) {
    absl::StatusOr<bool> eager = rbm_.Deliver(Key(sequence), {}, data.data(), 64, true, [] {});
    ASSERT_TRUE(eager.ok() && *eager);
  }
  const Rbm::Grant grant = rbm_.OpenAccount(2);
  EXPECT_EQ(grant.credits, 0u);
  std::vector<std::byte> out(64);
  ASSERT_TRUE(rbm_.Post(Key(0), CopyInto(out)).ok());
  EXPECT_EQ(rbm_.TakeCredits(), (std::vector<std::pair<uint64_t, uint32_t>>{{grant.account, 1}}));
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(out)).ok());
  EXPECT_EQ(rbm_.TakeCredits(), (std::vector<std::pair<uint64_t, uint32_t>>{{grant.account, 1}}));
  EXPECT_EQ(rbm_.reserved_bytes(), 4 * kEager);
  // Its eager messages now have room, and a local one finds no unclaimed buffer.
  const poe::SegmentHeader segment = Segment(SegmentType::kEagerData, 0, 8, 8, 9);
  ASSERT_TRUE(rbm_.Land(segment, scratch_.data(), grant.account).ok());
  ASSERT_TRUE(rbm_.Landed(segment).ok());
  absl::StatusOr<bool> eager = rbm_.Deliver(Key(10), {}, data.data(), 64, true, [] {});
  ASSERT_TRUE(eager.ok());
  EXPECT_FALSE(*eager);
}

TEST_F(RbmTest, StagedMessagesOfAClosedAccountAreStillReceived) {
  const std::vector<std::byte> data = Pattern(kEager);
  ASSERT_TRUE(Eager(data).ok());
  rbm_.CloseAccount(account_);
  EXPECT_EQ(rbm_.reserved_bytes(), 0u);
  // Three buffers are free and unclaimed; the staged one comes back when applied, to the
  // new account short of it (no credit for the closed one).
  const Rbm::Grant reopened = rbm_.OpenAccount(4);
  EXPECT_EQ(reopened.credits, 3u);
  std::vector<std::byte> out(kEager);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  EXPECT_EQ(out, data);
  EXPECT_EQ(rbm_.TakeCredits(),
            (std::vector<std::pair<uint64_t, uint32_t>>{{reopened.account, 1}}));
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

TEST_F(RbmTest, RendezvousIsClearedOnceRequestedAndPostedInEitherOrder) {
  const std::vector<std::byte> data = Pattern(3 * kSegment);
  std::vector<std::byte> early(data.size()), late(data.size());
  // Requested first, posted later.
  ASSERT_TRUE(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, data.size(), 0), account_).ok());
  EXPECT_TRUE(cleared_.empty());
  EXPECT_FALSE(rbm_.Arrived(Key(0)));
  ASSERT_TRUE(rbm_.Post(Key(0), CopyInto(late)).ok());
  ASSERT_EQ(cleared_.size(), 1u);
  EXPECT_EQ(cleared_[0], (std::pair<MessageKey, uint64_t>{Key(0), data.size()}));
  // Posted first, requested later.
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(early)).ok());
  ASSERT_TRUE(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, data.size(), 1), account_).ok());
  ASSERT_EQ(cleared_.size(), 2u);
  for (uint64_t sequence : {0, 1}) {
    for (uint64_t offset = 0; offset < data.size(); offset += kSegment) {
      const poe::SegmentHeader segment =
          Segment(SegmentType::kRendezvousData, offset, kSegment, data.size(), sequence);
      absl::StatusOr<std::byte*> landing = rbm_.Land(segment, scratch_.data(), account_);
      ASSERT_TRUE(landing.ok()) << landing.status();
      EXPECT_EQ(*landing, (sequence == 0 ? late : early).data() + offset);  // no staging
      std::memcpy(*landing, data.data() + offset, kSegment);
      ASSERT_TRUE(rbm_.Landed(segment).ok());
    }
  }
  EXPECT_EQ(completed_, 2);
  EXPECT_EQ(late, data);
  EXPECT_EQ(early, data);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  EXPECT_TRUE(rbm_.TakeCredits().empty());  // rendezvous spends no credit
}

TEST_F(RbmTest, RequestsWaitingForTheirReceivesAreAtMostTheLimitPerLink) {
  auto request = [&](uint64_t sequence, uint64_t account) {
    return rbm_.Request(Segment(SegmentType::kRequest, 0, 0, kSegment, sequence), account);
  };
  for (uint64_t sequence = 0; sequence < kWaiting; ++sequence) {
    ASSERT_TRUE(request(sequence, account_).ok()) << sequence;
  }
  const absl::Status status = request(kWaiting, account_);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("(tag 5, sequence 3)"));
  EXPECT_THAT(status.message(),
              HasSubstr("rendezvous request beyond the 3 its sender may have waiting for their "
                        "receives (rendezvous_waiting_per_peer)"));
  // Another link has as many of its own.
  const uint64_t other = rbm_.OpenAccount(0).account;
  EXPECT_TRUE(request(10, other).ok());
  // A request whose receive is posted does not wait; a receive posted for a waiting one
  // makes room for another.
  std::vector<std::byte> out(kSegment);
  ASSERT_TRUE(rbm_.Post(Key(20), CopyInto(out)).ok());
  EXPECT_TRUE(request(20, account_).ok());
  ASSERT_TRUE(rbm_.Post(Key(0), CopyInto(out)).ok());
  EXPECT_TRUE(request(21, account_).ok());
  EXPECT_FALSE(request(22, account_).ok());
  // Dropped requests wait no more.
  rbm_.Drop(CommId{7});
  for (uint64_t sequence = 0; sequence < kWaiting; ++sequence) {
    ASSERT_TRUE(request(sequence, account_).ok()) << sequence;
  }
}

TEST_F(RbmTest, ReduceReceiveReducesEachSegmentOnArrival) {
  std::vector<int32_t> incoming(5000), mine(5000), result(5000, 0);
  std::iota(incoming.begin(), incoming.end(), 100);
  std::iota(mine.begin(), mine.end(), 1);
  ASSERT_TRUE(rbm_.Post(Key(), SumInto(result, mine)).ok());
  ASSERT_TRUE(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, 20000), account_).ok());
  const auto* bytes = reinterpret_cast<const std::byte*>(incoming.data());
  ASSERT_TRUE(Arrive(Segment(SegmentType::kRendezvousData, 0, 8192, 20000), bytes).ok());
  EXPECT_EQ(result[2047], incoming[2047] + mine[2047]);
  EXPECT_EQ(result[2048], 0);  // later elements wait for their segment
  ASSERT_TRUE(Arrive(Segment(SegmentType::kRendezvousData, 8192, 8192, 20000), bytes).ok());
  ASSERT_TRUE(Arrive(Segment(SegmentType::kRendezvousData, 16384, 3616, 20000), bytes).ok());
  EXPECT_EQ(completed_, 1);
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(result[i], incoming[i] + mine[i]) << i;
}

TEST_F(RbmTest, ReduceReceiveAppliesWholeElementsAsTheSegmentLands) {
  std::vector<int32_t> incoming(2000), mine(2000), result(2000, 0);
  std::iota(incoming.begin(), incoming.end(), 100);
  std::iota(mine.begin(), mine.end(), 1);
  ASSERT_TRUE(rbm_.Post(Key(), SumInto(result, mine)).ok());
  ASSERT_TRUE(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, 8000), account_).ok());
  const auto* bytes = reinterpret_cast<const std::byte*>(incoming.data());
  const poe::SegmentHeader segment = Segment(SegmentType::kRendezvousData, 0, 8000, 8000);
  absl::StatusOr<std::byte*> landing = rbm_.Land(segment, scratch_.data(), account_);
  ASSERT_TRUE(landing.ok()) << landing.status();
  // 1001 bytes in place: the 250 whole elements among them are reduced, no more.
  std::memcpy(*landing, bytes, 1001);
  ASSERT_TRUE(rbm_.LandedPart(segment, 1001).ok());
  EXPECT_EQ(result[249], incoming[249] + mine[249]);
  EXPECT_EQ(result[250], 0);
  // Told again with nothing new, nothing changes; then 4002 bytes: up to element 1000.
  ASSERT_TRUE(rbm_.LandedPart(segment, 1001).ok());
  std::memcpy(*landing + 1001, bytes + 1001, 3001);
  ASSERT_TRUE(rbm_.LandedPart(segment, 4002).ok());
  EXPECT_EQ(result[999], incoming[999] + mine[999]);
  EXPECT_EQ(result[1000], 0);
  EXPECT_EQ(completed_, 0);
  // The rest lands: everything is reduced exactly once and the receive completes.
  std::memcpy(*landing + 4002, bytes + 4002, 3998);
  ASSERT_TRUE(rbm_.Landed(segment).ok());
  EXPECT_EQ(completed_, 1);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(result[i], incoming[i] + mine[i]) << i;
}

TEST_F(RbmTest, EmptyMessagesMatchToo) {
  std::vector<std::byte> out;
  ASSERT_TRUE(Eager({}).ok());
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  EXPECT_EQ(completed_, 1);
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(out)).ok());
  EXPECT_EQ(completed_, 1);  // waits for its (empty) message
  ASSERT_TRUE(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, 0, 1), account_).ok());
  EXPECT_EQ(completed_, 2);  // cleared, and nothing more to come
  EXPECT_EQ(cleared_.size(), 1u);
}

TEST_F(RbmTest, RejectsSegmentsThatDoNotFit) {
  const std::vector<std::byte> data = Pattern(3 * kSegment);
  std::vector<std::byte> out(100);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  EXPECT_EQ(rbm_.Land(Segment(SegmentType::kEagerData, 0, 200, 200), scratch_.data(), account_)
                .status()
                .message(),
            "message from rank 1 to rank 0 (tag 5, sequence 0): has 200 bytes but the posted "
            "receive expects 100");
  EXPECT_THAT(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, 300, 0), account_).message(),
              HasSubstr("has 300 bytes but the posted receive expects 100"));

  // Rendezvous data before its clear-to-send: nobody asked for it.
  EXPECT_THAT(
      rbm_.Land(Segment(SegmentType::kRendezvousData, 0, 64, 64, 1), scratch_.data(), account_)
          .status()
          .message(),
      HasSubstr("(tag 5, sequence 1): rendezvous data without a clear-to-send"));
  ASSERT_TRUE(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, data.size(), 2), account_).ok());
  EXPECT_THAT(rbm_.Land(Segment(SegmentType::kRendezvousData, 0, 64, data.size(), 2),
                        scratch_.data(), account_)
                  .status()
                  .message(),
              HasSubstr("rendezvous data without a clear-to-send"));  // not posted yet
  EXPECT_THAT(
      rbm_.Request(Segment(SegmentType::kRequest, 0, 0, data.size(), 2), account_).message(),
      HasSubstr("rendezvous request for a message that was already announced"));
  std::vector<std::byte> big(data.size());
  ASSERT_TRUE(rbm_.Post(Key(2), CopyInto(big)).ok());
  ASSERT_TRUE(
      Arrive(Segment(SegmentType::kRendezvousData, 0, kSegment, data.size(), 2), data.data()).ok());
  EXPECT_THAT(rbm_.Land(Segment(SegmentType::kRendezvousData, 2 * kSegment, 64, data.size(), 2),
                        scratch_.data(), account_)
                  .status()
                  .message(),
              HasSubstr("segment at offset 16384 arrived where offset 8192 was due"));
  EXPECT_THAT(rbm_.Land(Segment(SegmentType::kRendezvousData, kSegment, 64, 2 * data.size(), 2),
                        scratch_.data(), account_)
                  .status()
                  .message(),
              HasSubstr("total changed from 24576 to 49152 bytes"));
  EXPECT_THAT(
      rbm_.Land(Segment(SegmentType::kRendezvousData, kSegment, kSegment + 8, data.size(), 2),
                scratch_.data(), account_)
          .status()
          .message(),
      HasSubstr("segment of 8200 bytes exceeds the segment size of 8192"));
  ASSERT_TRUE(Eager(Pattern(30), 3).ok());
  std::vector<std::byte> small(10);
  EXPECT_THAT(rbm_.Post(Key(3), CopyInto(small)).message(),
              HasSubstr("has 30 bytes but the posted receive expects 10"));
}

// A message of another call than the posted receive's is refused however it comes, even
// where the sizes agree: an allreduce taking a bcast's message would give a wrong sum.
TEST_F(RbmTest, MessageOfAnotherCallIsRefusedWhicheverCameFirst) {
  const CallSignature sum{.collective = Collective::kAllreduce, .datatype = DataType::kFloat32};
  const CallSignature bcast{
      .collective = Collective::kBcast, .datatype = DataType::kFloat32, .root = 1};
  const std::vector<std::byte> data = Pattern(64);
  std::vector<std::byte> out(data.size());
  auto for_sum = [&] {
    RxTarget target = CopyInto(out);
    target.call = sum;
    return target;
  };
  const std::string refused =
      "bcast of float32 from root 1 sent to allreduce of float32 (sum): message from rank 1 to "
      "rank 0";
  // Eager, receive first.
  ASSERT_TRUE(rbm_.Post(Key(0), for_sum()).ok());
  poe::SegmentHeader eager = Segment(SegmentType::kEagerData, 0, data.size(), data.size(), 0);
  eager.call = bcast;
  EXPECT_THAT(rbm_.Land(eager, scratch_.data(), account_).status().message(), HasSubstr(refused));
  // Eager, message first.
  eager.sequence = 1;
  ASSERT_TRUE(Arrive(eager, data.data()).ok());
  EXPECT_THAT(rbm_.Post(Key(1), for_sum()).message(), HasSubstr(refused));
  // Rendezvous, either way round.
  poe::SegmentHeader request = Segment(SegmentType::kRequest, 0, 0, data.size(), 2);
  request.call = bcast;
  ASSERT_TRUE(rbm_.Post(Key(2), for_sum()).ok());
  EXPECT_THAT(rbm_.Request(request, account_).message(), HasSubstr(refused));
  request.sequence = 3;
  ASSERT_TRUE(rbm_.Request(request, account_).ok());
  EXPECT_THAT(rbm_.Post(Key(3), for_sum()).message(), HasSubstr(refused));
  // From a rank on this engine, either way round.
  ASSERT_TRUE(rbm_.Post(Key(4), for_sum()).ok());
  EXPECT_THAT(rbm_.Deliver(Key(4), bcast, data.data(), data.size(), true, [] {}).status().message(),
              HasSubstr(refused));
  ASSERT_TRUE(rbm_.Deliver(Key(5), bcast, data.data(), data.size(), true, [] {}).ok());
  EXPECT_THAT(rbm_.Post(Key(5), for_sum()).message(), HasSubstr(refused));
  // The same call is taken, and nothing was written by the refused ones.
  EXPECT_EQ(out, std::vector<std::byte>(data.size()));
  eager.sequence = 6;
  eager.call = sum;
  ASSERT_TRUE(rbm_.Post(Key(6), for_sum()).ok());
  ASSERT_TRUE(Arrive(eager, data.data()).ok());
  EXPECT_EQ(out, data);
}

TEST_F(RbmTest, LocalMessagesGoEagerWhenSmallElseWaitForTheReceive) {
  const std::vector<std::byte> small = Pattern(kEager), large = Pattern(3 * kEager);
  std::vector<std::byte> small_out(small.size()), large_out(large.size());
  int sent = 0;
  // Small with a free unclaimed buffer: staged, the sender is done at once.
  absl::StatusOr<bool> eager =
      rbm_.Deliver(Key(0), {}, small.data(), small.size(), true, [&] { ++sent; });
  ASSERT_TRUE(eager.ok() && *eager);
  EXPECT_EQ(sent, 1);
  EXPECT_EQ(rbm_.used_bytes(), kEager);
  // Large: kept until the receive is posted, then copied straight across.
  eager = rbm_.Deliver(Key(1), {}, large.data(), large.size(), false, [&] { ++sent; });
  ASSERT_TRUE(eager.ok());
  EXPECT_FALSE(*eager);
  EXPECT_EQ(sent, 1);
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(large_out)).ok());
  RunDeferred();
  EXPECT_EQ(sent, 2);
  EXPECT_EQ(large_out, large);
  ASSERT_TRUE(rbm_.Post(Key(0), CopyInto(small_out)).ok());
  EXPECT_EQ(small_out, small);
  EXPECT_EQ(completed_, 2);
  // Receive first: applied as the message comes.
  ASSERT_TRUE(rbm_.Post(Key(2), CopyInto(large_out)).ok());
  eager = rbm_.Deliver(Key(2), {}, large.data(), large.size(), false, [&] { ++sent; });
  ASSERT_TRUE(eager.ok());
  RunDeferred();
  EXPECT_EQ(sent, 3);
  EXPECT_EQ(completed_, 3);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  EXPECT_TRUE(rbm_.TakeCredits().empty());
}

// A communicator's ranks here are like one more peer link: at most kLocalCredits of their
// messages are staged at once, whatever the pool has free, and the rest wait for their
// receives, so that one sending among its own ranks leaves room for others and for links.
TEST_F(RbmTest, ACommunicatorStagesAtMostItsCreditsOfLocalMessages) {
  Rbm rbm(
      8 * kEager, kEager, kSegment, kWaiting, kLocalCredits, [](const MessageKey&, uint64_t) {},
      [](const CommId&, std::function<void()>) {});
  const std::vector<std::byte> data = Pattern(64);
  int sent = 0;
  // Communicator 7 sends six, communicator 8 one; nothing is received yet.
  for (uint64_t sequence = 0; sequence < 6; ++sequence) {
    ASSERT_TRUE(rbm.Deliver(Key(sequence), {}, data.data(), 64, true, [&] { ++sent; }).ok());
  }
  ASSERT_TRUE(*rbm.Deliver({CommId{8}, 1, 0, 5, 0}, {}, data.data(), 64, true, [&] { ++sent; }));
  EXPECT_EQ(sent, 3);  // communicator 7's first two and communicator 8's
  EXPECT_EQ(rbm.used_bytes(), 3 * kEager);
  EXPECT_FALSE(rbm.Arrived(Key(2)));
  // A link that comes up now gets all the credits it asks for.
  EXPECT_EQ(rbm.OpenAccount(4).credits, 4u);
  // Once one of communicator 7's messages is applied, its next one is staged again; the
  // ones that wait are copied straight across when received.
  std::vector<std::byte> out(64);
  ASSERT_TRUE(rbm.Post(Key(0), CopyInto(out)).ok());
  ASSERT_TRUE(*rbm.Deliver(Key(6), {}, data.data(), 64, true, [&] { ++sent; }));
  ASSERT_TRUE(rbm.Post(Key(2), CopyInto(out)).ok());
  EXPECT_EQ(out, data);
  EXPECT_EQ(completed_, 2);
  EXPECT_EQ(sent, 5);
  EXPECT_EQ(rbm.used_bytes(), 3 * kEager);
  // A communicator dropped with messages staged starts afresh.
  rbm.Drop(CommId{7});
  for (uint64_t sequence = 0; sequence < 2; ++sequence) {
    EXPECT_TRUE(*rbm.Deliver(Key(sequence), {}, data.data(), 64, true, [] {}));
  }
}

TEST_F(RbmTest, DetachedLocalMessageIsCopiedAndStillDelivered) {
  std::vector<std::byte> source = Pattern(3 * kEager);
  const std::vector<std::byte> expected = source;
  int sent = 0;
  ASSERT_TRUE(rbm_.Deliver(Key(), {}, source.data(), source.size(), false, [&] { ++sent; }).ok());
  rbm_.Detach(Key());
  source.assign(source.size(), std::byte{0});  // the sender's memory is free again
  std::vector<std::byte> out(source.size());
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  RunDeferred();
  EXPECT_EQ(out, expected);
  EXPECT_EQ(sent, 0);
  EXPECT_EQ(completed_, 1);
}

// A local message bigger than a piece is applied a piece now and one per deferred run, so
// the engine's other work goes between; its sender is done, and its receive complete,
// only with the last piece.
TEST_F(RbmTest, LargeLocalMessageIsAppliedAPieceAtATime) {
  const std::vector<std::byte> data = Pattern(2 * kSegment + 100);
  std::vector<std::byte> out(data.size(), std::byte{0});
  int sent = 0;
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  ASSERT_TRUE(rbm_.Deliver(Key(), {}, data.data(), data.size(), false, [&] { ++sent; }).ok());
  const auto applied = [&] {
    return std::mismatch(out.begin(), out.end(), data.begin()).first - out.begin();
  };
  EXPECT_EQ(applied(), kSegment);
  ASSERT_EQ(deferred_.size(), 1u);
  RunOnePiece();
  EXPECT_EQ(applied(), 2 * kSegment);
  EXPECT_EQ(sent, 0);
  EXPECT_EQ(completed_, 0);
  RunOnePiece();
  EXPECT_EQ(out, data);
  EXPECT_EQ(sent, 1);
  EXPECT_EQ(completed_, 1);
  EXPECT_TRUE(deferred_.empty());
}

TEST_F(RbmTest, LocalReduceInPiecesOfTheSetSize) {
  rbm_.SetPieceBytes(4000);  // 1000 int32 elements a piece
  std::vector<int32_t> incoming(2500), mine(2500), result(2500, 0);
  std::iota(incoming.begin(), incoming.end(), 100);
  std::iota(mine.begin(), mine.end(), 1);
  ASSERT_TRUE(rbm_.Post(Key(), SumInto(result, mine)).ok());
  int sent = 0;
  ASSERT_TRUE(rbm_.Deliver(Key(), {}, reinterpret_cast<const std::byte*>(incoming.data()),
                           incoming.size() * sizeof(int32_t), false, [&] { ++sent; })
                  .ok());
  EXPECT_EQ(result[999], incoming[999] + mine[999]);
  EXPECT_EQ(result[1000], 0);
  EXPECT_EQ(deferred_.size(), 1u);
  RunDeferred();
  for (size_t i = 0; i < result.size(); ++i) {
    ASSERT_EQ(result[i], incoming[i] + mine[i]) << "element " << i;
  }
  EXPECT_EQ(sent, 1);
  EXPECT_EQ(completed_, 1);
}

// The sender of a message half applied lets go of it (its call failed): the rest comes
// from the RBM's copy, and the sender is not told again.
TEST_F(RbmTest, ALocalMessageDetachedHalfAppliedIsStillDeliveredWhole) {
  std::vector<std::byte> source = Pattern(3 * kSegment);
  const std::vector<std::byte> expected = source;
  std::vector<std::byte> out(source.size());
  int sent = 0;
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  ASSERT_TRUE(rbm_.Deliver(Key(), {}, source.data(), source.size(), false, [&] { ++sent; }).ok());
  rbm_.Detach(Key());
  source.assign(source.size(), std::byte{0});
  RunDeferred();
  EXPECT_EQ(out, expected);
  EXPECT_EQ(sent, 0);
  EXPECT_EQ(completed_, 1);
}

// A receive given up while its local message is applied in pieces: its memory is not
// touched again, and the sender is done.
TEST_F(RbmTest, ALocalMessageAbandonedHalfAppliedTouchesNothingMore) {
  const std::vector<std::byte> data = Pattern(3 * kSegment);
  std::vector<std::byte> out(data.size(), std::byte{0});
  int sent = 0;
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  ASSERT_TRUE(rbm_.Deliver(Key(), {}, data.data(), data.size(), false, [&] { ++sent; }).ok());
  EXPECT_TRUE(rbm_.Abandon(Key()));
  RunDeferred();
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + kSegment, data.begin()));
  EXPECT_TRUE(std::all_of(out.begin() + kSegment, out.end(),
                          [](std::byte b) { return b == std::byte{0}; }));
  EXPECT_EQ(sent, 1);
  EXPECT_EQ(completed_, 0);
  EXPECT_TRUE(rbm_.Abandon(Key()));  // forgotten once whole
}

TEST_F(RbmTest, DropForgetsACommunicator) {
  ASSERT_TRUE(Eager(Pattern(200)).ok());
  std::vector<std::byte> out(10);
  ASSERT_TRUE(rbm_.Post(Key(3), CopyInto(out)).ok());
  rbm_.Drop(CommId{7});
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  ASSERT_TRUE(rbm_.Post(Key(3), CopyInto(out)).ok());  // the old post is gone
  EXPECT_EQ(completed_, 0);
}

TEST_F(RbmTest, DropUnfinishedKeepsWholeMessagesOfALeavingRank) {
  const std::vector<std::byte> data = Pattern(2 * kSegment);
  ASSERT_TRUE(Eager(Pattern(100), 0).ok());  // sequence 0: whole
  ASSERT_TRUE(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, data.size(), 1), account_).ok());
  std::vector<std::byte> half(data.size());  // sequence 1: half arrived
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(half)).ok());
  ASSERT_TRUE(
      Arrive(Segment(SegmentType::kRendezvousData, 0, kSegment, data.size(), 1), data.data()).ok());
  std::vector<std::byte> posted(100);
  ASSERT_TRUE(rbm_.Post(Key(2), CopyInto(posted)).ok());  // sequence 2: nothing yet
  EXPECT_TRUE(rbm_.Arrived(Key(0)));
  EXPECT_FALSE(rbm_.Arrived(Key(1)));
  EXPECT_EQ(rbm_.used_bytes(), kEager);

  rbm_.DropUnfinished(CommId{7}, {2});  // another rank left: nothing changes
  EXPECT_EQ(rbm_.used_bytes(), kEager);
  rbm_.DropUnfinished(CommId{7}, {1});
  EXPECT_EQ(rbm_.used_bytes(), kEager);
  EXPECT_TRUE(rbm_.Arrived(Key(0)));
  std::vector<std::byte> out(100);
  ASSERT_TRUE(rbm_.Post(Key(0), CopyInto(out)).ok());
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(out, Pattern(100));
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(half)).ok());  // the old posts are gone
  ASSERT_TRUE(rbm_.Post(Key(2), CopyInto(posted)).ok());
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

TEST_F(RbmTest, AbandonedReceiveDiscardsTheRest) {
  const std::vector<std::byte> data = Pattern(3 * kSegment);
  std::vector<std::byte> out(data.size(), std::byte{0x11});
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  ASSERT_TRUE(rbm_.Request(Segment(SegmentType::kRequest, 0, 0, data.size()), account_).ok());
  ASSERT_TRUE(
      Arrive(Segment(SegmentType::kRendezvousData, 0, kSegment, data.size()), data.data()).ok());
  // The next segment is landing in `out` when the receive is given up: `out` is free only
  // once that segment is in, which on_complete tells.
  const poe::SegmentHeader second =
      Segment(SegmentType::kRendezvousData, kSegment, kSegment, data.size());
  absl::StatusOr<std::byte*> landing = rbm_.Land(second, scratch_.data(), account_);
  ASSERT_TRUE(landing.ok());
  EXPECT_EQ(*landing, out.data() + kSegment);
  EXPECT_FALSE(rbm_.Abandon(Key()));
  std::memcpy(*landing, data.data() + kSegment, kSegment);
  ASSERT_TRUE(rbm_.Landed(second).ok());
  EXPECT_EQ(completed_, 1);
  const std::vector<std::byte> snapshot = out;
  ASSERT_TRUE(Arrive(Segment(SegmentType::kRendezvousData, 2 * kSegment, kSegment, data.size()),
                     data.data())
                  .ok());  // discarded
  EXPECT_EQ(out, snapshot);
  EXPECT_EQ(completed_, 1);
  EXPECT_TRUE(rbm_.Abandon(Key()));  // forgotten once whole

  std::vector<std::byte> other(100, std::byte{0x22});
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(other)).ok());
  EXPECT_TRUE(rbm_.Abandon(Key(1)));  // nothing landing: free at once
  ASSERT_TRUE(Eager(Pattern(100), 1).ok());
  EXPECT_EQ(other, std::vector<std::byte>(100, std::byte{0x22}));
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  EXPECT_EQ(rbm_.TakeCredits().size(), 1u);  // the discarded eager message's credit
}

}  // namespace
}  // namespace cclo::hw::emu
