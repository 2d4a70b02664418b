#include "hw/poe/handshake.h"

#include <functional>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hw/poe/wire.h"
#include "tests/fuzz/mutator.h"

namespace cclo::hw::poe {
namespace {

CommSecret Secret(uint8_t seed) {
  CommSecret secret{};
  for (size_t i = 0; i < secret.size(); ++i) secret[i] = static_cast<uint8_t>(seed * 31 + i);
  return secret;
}

ControlMessage Roundtrip(const ControlMessage& message) {
  const std::vector<std::byte> bytes = EncodeControl(message);
  absl::StatusOr<ControlMessage> decoded = DecodeControl(bytes.data(), bytes.size());
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *decoded : ControlMessage{};
}

TEST(HandshakeTest, ControlMessagesRoundTrip) {
  Nonce nonce{};
  nonce[0] = 7;
  Mac mac{};
  mac[31] = 9;
  const ControlMessage hello{.kind = ControlKind::kHello,
                             .nonce = nonce,
                             .segment_bytes = 65536,
                             .eager_bytes = 16384,
                             .timeout_ms = 10'000,
                             .connector = "10.0.0.1:4000",
                             .acceptor = "10.0.0.2:4000"};
  EXPECT_EQ(Roundtrip(hello), hello);
  const ControlMessage challenge{.kind = ControlKind::kChallenge,
                                 .nonce = nonce,
                                 .segment_bytes = 4096,
                                 .eager_bytes = 0,
                                 .timeout_ms = 86'400'000,
                                 .mac = mac};
  EXPECT_EQ(Roundtrip(challenge), challenge);
  const ControlMessage response{.kind = ControlKind::kResponse, .mac = mac};
  EXPECT_EQ(Roundtrip(response), response);
  EXPECT_EQ(Roundtrip({.kind = ControlKind::kAccept}).kind, ControlKind::kAccept);
  EXPECT_EQ(Roundtrip({.kind = ControlKind::kHeartbeat}).kind, ControlKind::kHeartbeat);
  EXPECT_EQ(EncodeControl({.kind = ControlKind::kHeartbeat}).size(), 1u);
  const ControlMessage bye{.kind = ControlKind::kBye, .reason = "engine shutting down"};
  EXPECT_EQ(Roundtrip(bye), bye);
  const ControlMessage broke{
      .kind = ControlKind::kBye, .reason = "missed its deadline", .bye = ByeKind::kBroke};
  EXPECT_EQ(Roundtrip(broke), broke);
  const ControlMessage depart{
      .kind = ControlKind::kDepart, .reason = "rank 3 left", .rank = 0xFFFFFFFF};
  EXPECT_EQ(Roundtrip(depart), depart);
  EXPECT_LE(EncodeControl(hello).size(), kMaxControlBytes);
}

TEST(HandshakeTest, LongStringsAreCut) {
  const ControlMessage refuse{.kind = ControlKind::kRefuse, .reason = std::string(1000, 'x')};
  EXPECT_EQ(Roundtrip(refuse).reason, std::string(kMaxControlString, 'x'));
}

TEST(HandshakeTest, RejectsMalformedMessages) {
  absl::StatusOr<ControlMessage> decoded = DecodeControl(nullptr, 0);
  EXPECT_EQ(decoded.status().message(), "empty control message");
  const std::byte unknown[] = {std::byte{42}};
  EXPECT_EQ(DecodeControl(unknown, 1).status().message(), "unknown control message kind 42");
  std::vector<std::byte> response = EncodeControl({.kind = ControlKind::kResponse});
  EXPECT_EQ(DecodeControl(response.data(), response.size() - 1).status().message(),
            "malformed response message of 32 bytes");
  response.push_back(std::byte{0});
  EXPECT_EQ(DecodeControl(response.data(), response.size()).status().message(),
            "malformed response message of 34 bytes");
  const std::byte heartbeat[] = {std::byte{7}, std::byte{0}};
  EXPECT_EQ(DecodeControl(heartbeat, 2).status().message(),
            "malformed heartbeat message of 2 bytes");
  // A BYE says one of two things of the communicator.
  std::vector<std::byte> bye = EncodeControl({.kind = ControlKind::kBye, .reason = "done"});
  bye[1] = std::byte{2};
  EXPECT_EQ(DecodeControl(bye.data(), bye.size()).status(),
            absl::InvalidArgumentError(
                "bye message says 2 of the communicator: 0 (ranks left) or 1 (broke it)"));
  // A DEPART names its rank in 4 bytes.
  const std::vector<std::byte> depart =
      EncodeControl({.kind = ControlKind::kDepart, .reason = "done", .rank = 1});
  EXPECT_EQ(depart.size(), 1u + 4 + 2 + 4);
  EXPECT_EQ(DecodeControl(depart.data(), 3).status().message(),
            "malformed depart message of 3 bytes");
}

TEST(HandshakeTest, RandomBytesNeverCrash) {
  testing::Mutator random(7);
  std::vector<std::byte> bytes;
  for (int round = 0; round < 100000; ++round) {
    bytes.resize(random.Below(80));
    random.Fill(bytes.data(), bytes.size());
    if (!bytes.empty()) bytes[0] = std::byte(1 + random.Below(8));  // a known kind
    absl::StatusOr<ControlMessage> decoded = DecodeControl(bytes.data(), bytes.size());
    if (decoded.ok()) {
      EXPECT_EQ(EncodeControl(*decoded), bytes);
    } else {
      EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_FALSE(decoded.status().message().empty());
    }
  }
}

TEST(HandshakeTest, ProofsBindSecretRoleCommAndEveryFieldOfBothMessages) {
  const CommId comm{1, 2, 3};
  const ControlMessage hello{.kind = ControlKind::kHello,
                             .nonce = {1},
                             .segment_bytes = 4096,
                             .eager_bytes = 1024,
                             .timeout_ms = 10'000,
                             .connector = "a:1",
                             .acceptor = "b:2"};
  const ControlMessage challenge{.kind = ControlKind::kChallenge,
                                 .nonce = {2},
                                 .segment_bytes = 8192,
                                 .eager_bytes = 2048,
                                 .timeout_ms = 20'000};
  const Mac base = HandshakeMac(Secret(1), HandshakeRole::kAcceptor, comm, hello, challenge);
  EXPECT_TRUE(
      MacEqual(base, HandshakeMac(Secret(1), HandshakeRole::kAcceptor, comm, hello, challenge)));
  EXPECT_FALSE(
      MacEqual(base, HandshakeMac(Secret(2), HandshakeRole::kAcceptor, comm, hello, challenge)));
  EXPECT_FALSE(
      MacEqual(base, HandshakeMac(Secret(1), HandshakeRole::kConnector, comm, hello, challenge)));
  EXPECT_FALSE(MacEqual(
      base, HandshakeMac(Secret(1), HandshakeRole::kAcceptor, CommId{1, 2, 4}, hello, challenge)));
  // Every field either side announces, changed on the way, changes the proof.
  const std::vector<std::function<void(ControlMessage&)>> changes = {
      [](ControlMessage& m) { m.nonce[0] ^= 1; },
      [](ControlMessage& m) { m.segment_bytes += 8; },
      [](ControlMessage& m) { m.eager_bytes -= 8; },
      [](ControlMessage& m) { m.timeout_ms -= 1; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    ControlMessage h = hello, c = challenge;
    changes[i](h);
    changes[i](c);
    EXPECT_FALSE(
        MacEqual(base, HandshakeMac(Secret(1), HandshakeRole::kAcceptor, comm, h, challenge)))
        << "hello change " << i;
    EXPECT_FALSE(MacEqual(base, HandshakeMac(Secret(1), HandshakeRole::kAcceptor, comm, hello, c)))
        << "challenge change " << i;
  }
  ControlMessage h = hello;
  h.acceptor = "c:2";
  EXPECT_FALSE(
      MacEqual(base, HandshakeMac(Secret(1), HandshakeRole::kAcceptor, comm, h, challenge)));
  // The address fields are length-prefixed, so moving a byte between them changes the proof.
  h.connector = "a:1b";
  h.acceptor = ":2";
  EXPECT_FALSE(
      MacEqual(base, HandshakeMac(Secret(1), HandshakeRole::kAcceptor, comm, h, challenge)));
  // The two nonces are not interchangeable.
  ControlMessage swapped_hello = hello, swapped_challenge = challenge;
  std::swap(swapped_hello.nonce, swapped_challenge.nonce);
  EXPECT_FALSE(MacEqual(base, HandshakeMac(Secret(1), HandshakeRole::kAcceptor, comm, swapped_hello,
                                           swapped_challenge)));
}

TEST(HandshakeTest, NoncesAreFresh) { EXPECT_NE(RandomNonce(), RandomNonce()); }

}  // namespace
}  // namespace cclo::hw::poe
