#include "hw/poe/wire.h"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/mutator.h"

namespace cclo::hw::poe {
namespace {

/// A rendezvous data segment in the middle of a message.
SegmentHeader Sample() {
  SegmentHeader h;
  h.type = SegmentType::kRendezvousData;
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

TEST(WireTest, RoundTripsEveryType) {
  const SegmentHeader message = Sample();
  SegmentHeader eager = message;
  eager.type = SegmentType::kEagerData;
  eager.offset = 0;
  eager.total = eager.length;
  eager.call = {.collective = Collective::kAllreduce,
                .datatype = DataType::kFloat32,
                .reduce_op = ReduceOp::kMax};
  SegmentHeader empty = eager;
  empty.length = 0;
  empty.total = 0;
  SegmentHeader request = message;
  request.type = SegmentType::kRequest;
  request.length = 0;
  request.offset = 0;
  request.call = {
      .collective = Collective::kBcast, .datatype = DataType::kInt64, .root = 0xA1B2C3D4};
  SegmentHeader clear = request;
  clear.type = SegmentType::kClearToSend;
  clear.call = {};  // only the first segment of a message carries it
  SegmentHeader empty_request = request;
  empty_request.total = 0;
  const SegmentHeader control{.type = SegmentType::kControl, .length = 40, .total = 40};
  const SegmentHeader credit{.type = SegmentType::kCredit, .comm = message.comm, .total = 8};
  const SegmentHeader most{.type = SegmentType::kCredit, .total = kMaxCredits};
  const SegmentHeader none{.type = SegmentType::kCredit, .total = 0};  // a first grant
  for (const SegmentHeader& h :
       {message, eager, empty, request, clear, empty_request, control, credit, most, none}) {
    const EncodedHeader bytes = Encode(h);
    absl::StatusOr<SegmentHeader> decoded = Decode(bytes.data(), bytes.size());
    ASSERT_TRUE(decoded.ok()) << Describe(h) << ": " << decoded.status();
    EXPECT_EQ(*decoded, h);
  }
}

TEST(WireTest, DescribesEachType) {
  SegmentHeader h = Sample();
  EXPECT_EQ(Describe(h),
            "rendezvous data src=3 dst=16909060 tag=4294967295 seq=1234605616436508552 [8192, "
            "12288) of 1048576 comm=a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
  h.type = SegmentType::kClearToSend;
  EXPECT_EQ(Describe(h).rfind("clear-to-send src=3", 0), 0u);
  h.type = SegmentType::kRequest;
  h.call = {.collective = Collective::kReduce, .datatype = DataType::kInt32, .root = 2};
  EXPECT_EQ(Describe(h).substr(Describe(h).find(" comm=")),
            " comm=a0a1a2a3a4a5a6a7a8a9aaabacadaeaf call=reduce of int32 (sum) from root 2");
  EXPECT_EQ(SegmentTypeName(SegmentType::kRequest), "rendezvous request");
  EXPECT_EQ(SegmentTypeName(SegmentType::kEagerData), "eager");
  EXPECT_EQ(SegmentTypeName(SegmentType::kCredit), "credit");
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
  EXPECT_EQ(bytes[4], std::byte{7});
  Poke<uint8_t>(bytes, 4, 1);  // the eager-only protocol before rendezvous
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: unsupported version 1, this engine speaks 7");
  Poke<uint8_t>(bytes, 4, 2);  // one session carrying both directions
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: unsupported version 2, this engine speaks 7");
  Poke<uint8_t>(bytes, 4, 3);  // no heartbeats
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: unsupported version 3, this engine speaks 7");
  Poke<uint8_t>(bytes, 4, 4);  // no call signature
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: unsupported version 4, this engine speaks 7");
  Poke<uint8_t>(bytes, 4, 5);  // no departures of one rank told, no word on breaks
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: unsupported version 5, this engine speaks 7");
  Poke<uint8_t>(bytes, 4, 6);  // no algorithm in the call signature
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: unsupported version 6, this engine speaks 7");
  Poke<uint8_t>(bytes, 4, 8);
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: unsupported version 8, this engine speaks 7");
}

// A control segment of another version (a HELLO to refuse, the refusal in the peer's
// version) reads as in this one; nothing else does.
TEST(WireTest, ControlSegmentsOfOtherVersionsAreReadAsForeign) {
  SegmentHeader control{.type = SegmentType::kControl, .comm = Sample().comm, .length = 40};
  control.total = 40;
  const EncodedHeader bytes = Encode(control, 4);
  EXPECT_EQ(bytes[4], std::byte{4});
  std::optional<ForeignHeader> foreign = DecodeForeign(bytes.data(), bytes.size());
  ASSERT_TRUE(foreign.has_value());
  EXPECT_EQ(foreign->version, 4);
  EXPECT_EQ(foreign->header, control);
  const EncodedHeader ours = Encode(control);
  EXPECT_FALSE(DecodeForeign(ours.data(), ours.size()).has_value());
  const EncodedHeader data = Encode(Sample(), 4);
  EXPECT_FALSE(DecodeForeign(data.data(), data.size()).has_value());
  EncodedHeader bad_magic = bytes;
  Poke<uint32_t>(bad_magic, 0, 0xDEADBEEF);
  EXPECT_FALSE(DecodeForeign(bad_magic.data(), bad_magic.size()).has_value());
  EXPECT_FALSE(DecodeForeign(bytes.data(), kHeaderBytes - 1).has_value());
}

TEST(WireTest, RejectsUnknownTypes) {
  EncodedHeader bytes = Encode(Sample());
  Poke<uint8_t>(bytes, 5, 0);
  EXPECT_EQ(DecodeError(bytes), "invalid segment header: segment type 0 is unknown");
  Poke<uint8_t>(bytes, 5, 7);
  EXPECT_EQ(DecodeError(bytes), "invalid segment header: segment type 7 is unknown");
  Poke<uint8_t>(bytes, 5, 200);
  EXPECT_EQ(DecodeError(bytes), "invalid segment header: segment type 200 is unknown");
}

TEST(WireTest, EagerSegmentsCarryTheWholeMessage) {
  SegmentHeader h = Sample();
  h.type = SegmentType::kEagerData;
  h.offset = 0;
  h.call = {.collective = Collective::kSend};
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: eager segment must carry its whole message: length 4096, "
            "total 1048576");
  h.length = 0;
  EXPECT_NE(DecodeError(Encode(h)).find("whole message"), std::string::npos);
}

TEST(WireTest, RendezvousRequestsAndClearToSendsAreBareHeaders) {
  for (SegmentType type : {SegmentType::kRequest, SegmentType::kClearToSend}) {
    SegmentHeader h = Sample();
    h.type = type;
    h.offset = 0;
    h.call = {.collective = Collective::kSend};  // a request's; a clear-to-send carries none
    const std::string name = SegmentTypeName(type);
    EXPECT_EQ(DecodeError(Encode(h)), "invalid segment header: " + name +
                                          " segment must be a bare header: offset 0, length 4096");
  }
  // A request's offset is its call signature; a clear-to-send's must be 0.
  SegmentHeader h = Sample();
  h.type = SegmentType::kClearToSend;
  h.length = 0;
  h.offset = 64;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: clear-to-send segment must be a bare header: offset 64, "
            "length 0");
}

TEST(WireTest, RejectsCallSignaturesThatNameNoCall) {
  SegmentHeader h = Sample();
  h.type = SegmentType::kEagerData;
  h.offset = 0;
  h.total = h.length;
  h.call = {
      .collective = Collective::kGather, .datatype = DataType::kFloat64, .algorithm = 3, .root = 9};
  EncodedHeader bytes = Encode(h);
  EXPECT_EQ(bytes[48], std::byte{6});  // gather
  EXPECT_EQ(bytes[49], std::byte{7});  // float64
  EXPECT_EQ(bytes[51], std::byte{3});  // the algorithm's place
  EXPECT_EQ(bytes[52], std::byte{9});  // root, low byte first
  absl::StatusOr<SegmentHeader> decoded = Decode(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->call, h.call);
  Poke<uint8_t>(bytes, 48, 12);
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: call signature of collective 12, datatype 7 and reduce op "
            "0 names no call");
  // A nop sends no message, whatever it names.
  Poke<uint8_t>(bytes, 48, 0);
  EXPECT_EQ(DecodeError(bytes),
            "invalid segment header: call signature of collective 0, datatype 7 and reduce op "
            "0 names no call");
  bytes = Encode(h);
  Poke<uint8_t>(bytes, 49, 8);
  EXPECT_NE(DecodeError(bytes).find("datatype 8"), std::string::npos);
  bytes = Encode(h);
  Poke<uint8_t>(bytes, 50, 4);
  EXPECT_NE(DecodeError(bytes).find("reduce op 4"), std::string::npos);
}

// A call has one signature: another spelling of it would be refused by its receive as
// another call, described as the same one ("send/recv sent to send/recv").
TEST(WireTest, RejectsCallSignaturesNoCallSends) {
  SegmentHeader h = Sample();
  h.type = SegmentType::kRequest;
  h.length = 0;
  h.offset = 0;
  for (const CallSignature& call : std::initializer_list<CallSignature>{
           {.collective = Collective::kRecv},
           {.collective = Collective::kSend, .datatype = DataType::kInt32},
           {.collective = Collective::kBarrier, .root = 1},
           {.collective = Collective::kAllreduce, .root = 1},
           {.collective = Collective::kBcast, .reduce_op = ReduceOp::kMax},
           {.collective = Collective::kSend, .algorithm = 1}}) {
    h.call = call;
    EXPECT_NE(DecodeError(Encode(h)).find("is not a call's"), std::string::npos)
        << DescribeSignature(call);
  }
  h.call = {.collective = Collective::kRecv};
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: call signature of collective 2, datatype 0, reduce op 0, "
            "algorithm 0 and root 0 is not a call's: point-to-point is send, fields its "
            "collective does not use are 0");
}

TEST(WireTest, RendezvousDataIsNeverEmpty) {
  SegmentHeader h = Sample();
  h.length = 0;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: empty rendezvous data segment in a message of 1048576 "
            "bytes");
  h.offset = 0;
  h.total = 0;
  EXPECT_NE(DecodeError(Encode(h)).find("empty rendezvous data segment"), std::string::npos);
}

TEST(WireTest, CreditSegmentsNameNoMessageAndABoundedCount) {
  SegmentHeader h{.type = SegmentType::kCredit, .total = kMaxCredits + 1};
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: credit segment returns 65537 credits, more than 65536");
  h.total = 2;
  h.sequence = 5;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: credit segment carries src 0, dst 0, tag 0, sequence 5; "
            "all must be 0");
  h.sequence = 0;
  h.src = 1;
  EXPECT_NE(DecodeError(Encode(h)).find("carries src 1"), std::string::npos);
  h.src = 0;
  h.length = 8;
  h.total = 8;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: credit segment must be a bare header: offset 0, length 8");
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
            "invalid segment header: segment of 4096 bytes at offset 1048476 lies beyond the "
            "message total of 1048576 bytes");
  h.offset = ~0ull - 10;  // offset + length would wrap around
  h.total = ~0ull;
  EXPECT_EQ(DecodeError(Encode(h)),
            "invalid segment header: segment of 4096 bytes at offset 18446744073709551605 lies "
            "beyond the message total of 18446744073709551615 bytes");
  h.offset = 5;
  h.total = 4;
  h.length = 0;
  EXPECT_NE(DecodeError(Encode(h)).find("lies beyond"), std::string::npos);
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

/// What every header that decodes must satisfy (the table in wire.h).
void ExpectValid(const SegmentHeader& h) {
  EXPECT_LE(h.length, kMaxSegmentBytes);
  EXPECT_LE(h.offset, h.total);
  EXPECT_LE(h.length, h.total - h.offset);
  switch (h.type) {
    case SegmentType::kEagerData:
      EXPECT_EQ(h.offset, 0u);
      EXPECT_EQ(h.length, h.total);
      EXPECT_NE(h.call.collective, Collective::kNop);
      break;
    case SegmentType::kControl:
      EXPECT_GE(h.length, 1u);
      EXPECT_LE(h.length, kMaxControlBytes);
      EXPECT_EQ(h.total, h.length);
      EXPECT_EQ(h.src | h.dst | h.tag | h.sequence, 0u);
      break;
    case SegmentType::kRequest:
      EXPECT_NE(h.call.collective, Collective::kNop);
      [[fallthrough]];
    case SegmentType::kClearToSend:
      EXPECT_EQ(h.offset | h.length, 0u);
      break;
    case SegmentType::kRendezvousData:
      EXPECT_GE(h.length, 1u);
      break;
    case SegmentType::kCredit:
      EXPECT_EQ(h.offset | h.length | h.src | h.dst | h.tag | h.sequence, 0u);
      EXPECT_LE(h.total, kMaxCredits);
      break;
    default:
      ADD_FAILURE() << "decoded an unknown type " << int(h.type);
  }
}

TEST(WireTest, RandomBytesNeverCrash) {
  testing::Mutator random(42);
  // Valid headers of every type to mutate, to get past the magic and version checks.
  std::vector<SegmentHeader> seeds = {Sample()};
  for (uint8_t type = 1; type <= 6; ++type) {
    SegmentHeader h{.type = SegmentType(type), .comm = Sample().comm};
    h.total = type == 1 || type == 2 || type == 6 ? 8 : 4096;
    h.length = type == 1 || type == 2 ? 8 : type == 5 ? 4096 : 0;
    if (type >= 3 && type <= 5) h.src = h.dst = h.tag = h.sequence = 1;
    if (type == 1 || type == 3) h.call = {.collective = Collective::kSend};
    seeds.push_back(h);
  }
  EncodedHeader bytes;
  std::vector<int> accepted(7);
  for (int round = 0; round < 400000; ++round) {
    if (round % 4 == 0) {
      random.Fill(bytes.data(), bytes.size());
    } else {
      // Flip a few bytes or fields of a valid header.
      bytes = Encode(random.Pick(seeds));
      random.FlipBytes(bytes.data(), bytes.size());
      if (random.OneIn(4)) Poke<uint8_t>(bytes, 5, 1 + random.Below(6));
    }
    absl::StatusOr<SegmentHeader> decoded =
        Decode(bytes.data(), random.OneIn(8) ? random.Below(kHeaderBytes) : kHeaderBytes);
    if (!decoded.ok()) {
      EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_FALSE(decoded.status().message().empty());
      continue;
    }
    ++accepted[static_cast<int>(decoded->type)];
    ExpectValid(*decoded);
    // A header that decodes re-encodes to the same bytes.
    EXPECT_EQ(Encode(*decoded), bytes);
  }
  for (int type = 1; type <= 6; ++type) EXPECT_GT(accepted[type], 0) << "type " << type;
}

}  // namespace
}  // namespace cclo::hw::poe
