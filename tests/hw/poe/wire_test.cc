#include "hw/poe/wire.h"

#include <cstring>
#include <random>

#include "gtest/gtest.h"

namespace cclo::hw::poe {
namespace {

SegmentHeader Sample() {
  SegmentHeader h;
  h.type = SegmentType::kEagerData;
  for (size_t i = 0; i < h.comm.size(); ++i) h.comm[i] = static_cast<uint8_t>(0xA0 + i);
  h.src = 3;
  h.dst = 0x01020304;
  h.tag = 0xFFFFFFFF;
  h.length = 4096;
  h.sequence = 0x1122334455667788ull;
  h.offset = 8192;
  h.total = 1 << 20;
  return h;
}

std::string DecodeError(const EncodedHeader& bytes) {
  absl::StatusOr<SegmentHeader> decoded = Decode(bytes.data(), bytes.size());
  EXPECT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(decoded.status().message());
}

template <typename T>
void Poke(EncodedHeader& bytes, size_t offset, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) bytes[offset + i] = std::byte(value >> (8 * i));
}

TEST(WireTest, RoundTripsEveryField) {
  const SegmentHeader h = Sample();
  const EncodedHeader bytes = Encode(h);
  absl::StatusOr<SegmentHeader> decoded = Decode(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, h);
}

TEST(WireTest, LayoutIsLittleEndian) {
  const EncodedHeader bytes = Encode(Sample());
  EXPECT_EQ(bytes[0], std::byte{'C'});
  EXPECT_EQ(bytes[3], std::byte{'O'});
  EXPECT_EQ(bytes[4], std::byte{kWireVersion});
  EXPECT_EQ(bytes[28], std::byte{0x04});  // dst low byte first
  EXPECT_EQ(bytes[40], std::byte{0x88});  // sequence low byte first
}

TEST(WireTest, RoundTripsEmptyMessageAndControl) {
  SegmentHeader empty = Sample();
  empty.length = 0;
  empty.offset = 0;
  empty.total = 0;
  EncodedHeader bytes = Encode(empty);
  ASSERT_TRUE(Decode(bytes.data(), bytes.size()).ok());

  SegmentHeader control{.type = SegmentType::kControl, .length = 40, .total = 40};
  bytes = Encode(control);
  absl::StatusOr<SegmentHeader> decoded = Decode(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, control);
}

TEST(WireTest, RejectsShortInput) {
  const EncodedHeader bytes = Encode(Sample());
  absl::StatusOr<SegmentHeader> decoded = Decode(bytes.data(), kHeaderBytes - 1);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(), "invalid segment header: needs 64 bytes, got 63");
  EXPECT_FALSE(Decode(nullptr, 0).ok());
}

TEST(WireTest, RejectsBadMagic) {
  EncodedHeader bytes = Encode(Sample());
  Poke<uint32_t>(bytes, 0, 0xDEADBEEF);
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: bad magic 0xdeadbeef, expected 0x4f4c4343");
}

TEST(WireTest, RejectsOtherVersions) {
  EncodedHeader bytes = Encode(Sample());
  Poke<uint8_t>(bytes, 4, 2);
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: unsupported version 2, this engine speaks 1");
}

TEST(WireTest, RejectsUnknownAndReservedTypes) {
  EncodedHeader bytes = Encode(Sample());
  Poke<uint8_t>(bytes, 5, 0);
  EXPECT_EQ(DecodeError(bytes), "invalid segment header: segment type 0 is unknown");
  Poke<uint8_t>(bytes, 5, 4);
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: segment type 4 is reserved for rendezvous, not supported "
            "in version 1");
  Poke<uint8_t>(bytes, 5, 200);
  EXPECT_EQ(DecodeError(bytes), "invalid segment header: segment type 200 is unknown");
}

TEST(WireTest, RejectsReservedBits) {
  EncodedHeader bytes = Encode(Sample());
  Poke<uint16_t>(bytes, 6, 0x0100);
  EXPECT_EQ(DecodeError(bytes), "invalid segment header: reserved field is 0x0100, must be 0");
}

TEST(WireTest, RejectsOversizedSegment) {
  SegmentHeader h = Sample();
  h.length = kMaxSegmentBytes + 1;
  h.total = 1ull << 40;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: length 16777217 exceeds the maximum segment of 16777216 "
            "bytes");
}

TEST(WireTest, RejectsSegmentBeyondTotal) {
  SegmentHeader h = Sample();
  h.offset = h.total - 100;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: segment [1048476, 1052572) lies beyond the message total "
            "of 1048576 bytes");
  h.offset = ~0ull - 10;  // offset + length would wrap around
  h.total = ~0ull;
  EXPECT_NE(DecodeError(Encode(h)).find("lies beyond the message total"), std::string::npos);
  h.offset = 5;
  h.total = 4;
  h.length = 0;
  EXPECT_NE(DecodeError(Encode(h)).find("lies beyond"), std::string::npos);
}

TEST(WireTest, RejectsEmptySegmentOfNonEmptyMessage) {
  SegmentHeader h = Sample();
  h.length = 0;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: empty segment in a message of 1048576 bytes");
}

TEST(WireTest, RejectsMalformedControlSegments) {
  SegmentHeader h{.type = SegmentType::kControl, .length = kMaxControlBytes + 1};
  h.total = h.length;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: control segment length 1025 outside [1, 1024]");
  h.length = 10;
  h.total = 20;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: control segment must be whole: offset 0, length 10, "
            "total 20");
  h.total = 10;
  h.tag = 9;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: control segment carries src 0, dst 0, tag 9, sequence 0; "
            "all must be 0");
}

TEST(WireTest, RandomBytesNeverCrash) {
  std::mt19937_64 random(42);
  EncodedHeader bytes;
  int accepted = 0;
  for (int round = 0; round < 200000; ++round) {
    if (round % 2 == 0) {
      for (std::byte& b : bytes) b = std::byte(random());
    } else {
      // Start from a valid header and flip a few bytes, to get past the magic check.
      bytes = Encode(Sample());
      for (int k = 0; k < 3; ++k) bytes[random() % kHeaderBytes] = std::byte(random());
    }
    absl::StatusOr<SegmentHeader> decoded =
        Decode(bytes.data(), random() % 8 == 0 ? random() % kHeaderBytes : kHeaderBytes);
    if (!decoded.ok()) continue;
    ++accepted;
    EXPECT_LE(decoded->length, kMaxSegmentBytes);
    EXPECT_LE(decoded->offset, decoded->total);
    EXPECT_LE(decoded->length, decoded->total - decoded->offset);
    // A header that decodes re-encodes to the same bytes.
    EXPECT_EQ(Encode(*decoded), bytes);
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace cclo::hw::poe
