#include "hw/emu/rbm.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace cclo::hw::emu {
namespace {

constexpr uint64_t kBuffer = 64;

poe::SegmentHeader Segment(uint64_t offset, uint32_t length, uint64_t total,
                           uint64_t sequence = 0) {
  return {.type = poe::SegmentType::kEagerData,
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

class RbmTest : public ::testing::Test {
 protected:
  /// Lands `data[offset, offset + length)` as a network segment would.
  absl::Status Arrive(uint64_t offset, uint32_t length, uint64_t total, const std::byte* data,
                      uint64_t sequence = 0) {
    const poe::SegmentHeader header = Segment(offset, length, total, sequence);
    absl::StatusOr<std::byte*> landing = rbm_.Land(header, scratch_.data());
    if (!landing.ok()) return landing.status();
    if (*landing == nullptr) return absl::ResourceExhaustedError("no room");
    if (length > 0) std::memcpy(*landing, data + offset, length);
    return rbm_.Landed(header);
  }

  RxTarget CopyInto(std::vector<std::byte>& out) {
    return {.bytes = out.size(), .result = out.data(), .on_complete = [this] { ++completed_; }};
  }

  int spaces_ = 0;
  int completed_ = 0;
  std::vector<std::byte> scratch_ = std::vector<std::byte>(kBuffer);
  Rbm rbm_{4 * kBuffer, kBuffer, [this] { ++spaces_; }};
};

std::vector<std::byte> Pattern(size_t size) {
  std::vector<std::byte> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = std::byte(i * 7 + 1);
  return data;
}

TEST_F(RbmTest, PostedCopyLandsInTheDestination) {
  const std::vector<std::byte> data = Pattern(100);
  std::vector<std::byte> out(100);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  absl::StatusOr<std::byte*> landing = rbm_.Land(Segment(0, 64, 100), scratch_.data());
  ASSERT_TRUE(landing.ok());
  EXPECT_EQ(*landing, out.data());  // no staging
  std::memcpy(*landing, data.data(), 64);
  ASSERT_TRUE(rbm_.Landed(Segment(0, 64, 100)).ok());
  EXPECT_EQ(completed_, 0);
  ASSERT_TRUE(Arrive(64, 36, 100, data.data()).ok());
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(out, data);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

TEST_F(RbmTest, EarlyArrivalsAreStagedThenApplied) {
  const std::vector<std::byte> data = Pattern(150);
  ASSERT_TRUE(Arrive(0, 64, 150, data.data()).ok());
  ASSERT_TRUE(Arrive(64, 64, 150, data.data()).ok());
  EXPECT_EQ(rbm_.used_bytes(), 2 * kBuffer);
  std::vector<std::byte> out(150);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  EXPECT_EQ(spaces_, 2);
  EXPECT_EQ(completed_, 0);
  ASSERT_TRUE(Arrive(128, 22, 150, data.data()).ok());
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(out, data);
}

TEST_F(RbmTest, ReduceReceiveReducesEachSegmentOnArrival) {
  std::vector<int32_t> incoming(40), mine(40), result(40, 0);
  std::iota(incoming.begin(), incoming.end(), 100);
  std::iota(mine.begin(), mine.end(), 1);
  RxTarget target{.bytes = 160,
                  .function = Function::kReduce,
                  .result = reinterpret_cast<std::byte*>(result.data()),
                  .memory_operand = reinterpret_cast<const std::byte*>(mine.data()),
                  .datatype = DataType::kInt32,
                  .on_complete = [this] { ++completed_; }};
  ASSERT_TRUE(rbm_.Post(Key(), std::move(target)).ok());
  const auto* bytes = reinterpret_cast<const std::byte*>(incoming.data());
  ASSERT_TRUE(Arrive(0, 64, 160, bytes).ok());
  EXPECT_EQ(result[15], 115 + 16);
  EXPECT_EQ(result[16], 0);  // later elements wait for their segment
  ASSERT_TRUE(Arrive(64, 64, 160, bytes).ok());
  ASSERT_TRUE(Arrive(128, 32, 160, bytes).ok());
  EXPECT_EQ(completed_, 1);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(result[i], incoming[i] + mine[i]);
}

TEST_F(RbmTest, FullPoolAnswersNoRoomUntilTheReceiveIsPosted) {
  const std::vector<std::byte> data = Pattern(6 * kBuffer);
  for (uint64_t k = 0; k < 4; ++k) {
    ASSERT_TRUE(Arrive(k * kBuffer, kBuffer, data.size(), data.data()).ok());
  }
  EXPECT_EQ(rbm_.used_bytes(), rbm_.pool_bytes());
  absl::StatusOr<std::byte*> landing = rbm_.Land(Segment(256, 64, 384), scratch_.data());
  ASSERT_TRUE(landing.ok());
  EXPECT_EQ(*landing, nullptr);  // no room: the caller stops reading
  std::vector<std::byte> out(data.size());
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  EXPECT_EQ(spaces_, 4);
  ASSERT_TRUE(Arrive(256, 64, 384, data.data()).ok());  // asked again: goes direct
  ASSERT_TRUE(Arrive(320, 64, 384, data.data()).ok());
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(out, data);
}

TEST_F(RbmTest, EmptyMessagesMatchToo) {
  std::vector<std::byte> out;
  ASSERT_TRUE(Arrive(0, 0, 0, nullptr).ok());
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  EXPECT_EQ(completed_, 1);
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(out)).ok());
  EXPECT_EQ(completed_, 1);  // waits for its (empty) message
  ASSERT_TRUE(Arrive(0, 0, 0, nullptr, 1).ok());
  EXPECT_EQ(completed_, 2);
}

TEST_F(RbmTest, RejectsSegmentsThatDoNotFit) {
  const std::vector<std::byte> data = Pattern(1000);
  std::vector<std::byte> out(100);
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  absl::StatusOr<std::byte*> landing = rbm_.Land(Segment(0, 64, 200), scratch_.data());
  EXPECT_EQ(landing.status().message(),
            "message from rank 1 to rank 0 (tag 5, sequence 0) of communicator "
            "07000000000000000000000000000000: has 200 bytes but the posted receive expects 100");

  ASSERT_TRUE(Arrive(0, 64, 300, data.data(), 1).ok());
  EXPECT_NE(rbm_.Land(Segment(128, 64, 300, 1), scratch_.data())
                .status()
                .message()
                .find("segment at offset 128 arrived where offset 64 was due"),
            std::string::npos);
  EXPECT_NE(rbm_.Land(Segment(64, 64, 400, 1), scratch_.data())
                .status()
                .message()
                .find("total changed from 300 to 400 bytes"),
            std::string::npos);
  EXPECT_NE(rbm_.Land(Segment(0, 65, 300, 2), scratch_.data())
                .status()
                .message()
                .find("segment of 65 bytes exceeds the 64-byte rx buffers"),
            std::string::npos);
  std::vector<std::byte> small(10);
  EXPECT_NE(rbm_.Post(Key(1), CopyInto(small))
                .message()
                .find("has 300 bytes but the posted receive expects 10"),
            std::string::npos);
}

TEST_F(RbmTest, LocalDeliveryGoesDirectOrWaitsForSpace) {
  const std::vector<std::byte> data = Pattern(5 * kBuffer);
  for (uint64_t k = 0; k < 4; ++k) {
    absl::StatusOr<bool> delivered =
        rbm_.Deliver(Segment(k * kBuffer, kBuffer, data.size()), data.data() + k * kBuffer);
    ASSERT_TRUE(delivered.ok() && *delivered);
  }
  absl::StatusOr<bool> delivered = rbm_.Deliver(Segment(256, 64, 320), data.data() + 256);
  ASSERT_TRUE(delivered.ok());
  EXPECT_FALSE(*delivered);
  std::vector<std::byte> out(data.size());
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  delivered = rbm_.Deliver(Segment(256, 64, 320), data.data() + 256);
  ASSERT_TRUE(delivered.ok() && *delivered);
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(out, data);
}

TEST_F(RbmTest, DropForgetsACommunicator) {
  const std::vector<std::byte> data = Pattern(200);
  ASSERT_TRUE(Arrive(0, 64, 200, data.data()).ok());
  std::vector<std::byte> out(10);
  ASSERT_TRUE(rbm_.Post(Key(3), CopyInto(out)).ok());
  rbm_.Drop(CommId{7});
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  ASSERT_TRUE(rbm_.Post(Key(3), CopyInto(out)).ok());  // the old post is gone
  EXPECT_EQ(completed_, 0);
}

TEST_F(RbmTest, DropUnfinishedKeepsWholeMessagesOfALeavingRank) {
  const std::vector<std::byte> data = Pattern(100);
  ASSERT_TRUE(Arrive(0, 64, 100, data.data(), 0).ok());
  ASSERT_TRUE(Arrive(64, 36, 100, data.data(), 0).ok());  // sequence 0: whole
  ASSERT_TRUE(Arrive(0, 64, 100, data.data(), 1).ok());   // sequence 1: half
  std::vector<std::byte> posted(100);
  ASSERT_TRUE(rbm_.Post(Key(2), CopyInto(posted)).ok());  // sequence 2: nothing yet
  EXPECT_TRUE(rbm_.Arrived(Key(0)));
  EXPECT_FALSE(rbm_.Arrived(Key(1)));
  EXPECT_EQ(rbm_.used_bytes(), 3 * kBuffer);

  rbm_.DropUnfinished(CommId{7}, {2});  // another rank left: nothing changes
  EXPECT_EQ(rbm_.used_bytes(), 3 * kBuffer);
  rbm_.DropUnfinished(CommId{7}, {1});
  EXPECT_EQ(rbm_.used_bytes(), 2 * kBuffer);
  EXPECT_TRUE(rbm_.Arrived(Key(0)));
  EXPECT_FALSE(rbm_.Arrived(Key(1)));
  std::vector<std::byte> out(100);
  ASSERT_TRUE(rbm_.Post(Key(0), CopyInto(out)).ok());
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(out, data);
  ASSERT_TRUE(rbm_.Post(Key(2), CopyInto(posted)).ok());  // the old post is gone
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

TEST_F(RbmTest, AbandonedReceiveDiscardsTheRest) {
  const std::vector<std::byte> data = Pattern(200);
  std::vector<std::byte> out(200, std::byte{0x11});
  ASSERT_TRUE(rbm_.Post(Key(), CopyInto(out)).ok());
  ASSERT_TRUE(Arrive(0, 64, 200, data.data()).ok());
  // The next segment is landing in `out` when the receive is given up: `out` is free only
  // once that segment is in, which on_complete tells.
  absl::StatusOr<std::byte*> landing = rbm_.Land(Segment(64, 64, 200), scratch_.data());
  ASSERT_TRUE(landing.ok());
  EXPECT_EQ(*landing, out.data() + 64);
  EXPECT_FALSE(rbm_.Abandon(Key()));
  std::memcpy(*landing, data.data() + 64, 64);
  ASSERT_TRUE(rbm_.Landed(Segment(64, 64, 200)).ok());
  EXPECT_EQ(completed_, 1);
  const std::vector<std::byte> snapshot = out;
  ASSERT_TRUE(Arrive(128, 64, 200, data.data()).ok());  // discarded
  ASSERT_TRUE(Arrive(192, 8, 200, data.data()).ok());
  EXPECT_EQ(out, snapshot);
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
  EXPECT_TRUE(rbm_.Abandon(Key()));  // forgotten once whole

  std::vector<std::byte> other(100, std::byte{0x22});
  ASSERT_TRUE(rbm_.Post(Key(1), CopyInto(other)).ok());
  EXPECT_TRUE(rbm_.Abandon(Key(1)));  // nothing landing: free at once
  ASSERT_TRUE(Arrive(0, 64, 100, data.data(), 1).ok());
  ASSERT_TRUE(Arrive(64, 36, 100, data.data(), 1).ok());
  EXPECT_EQ(other, std::vector<std::byte>(100, std::byte{0x22}));
  EXPECT_EQ(completed_, 1);
  EXPECT_EQ(rbm_.used_bytes(), 0u);
}

}  // namespace
}  // namespace cclo::hw::emu
