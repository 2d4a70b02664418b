// Control messages of a data session and the mutual HMAC handshake that opens it.
//
// A data session belongs to one (communicator, peer engine) pair and carries data one way:
// each engine of a communicator connects to every other (the connector) and sends on that
// session; the other accepts it (the acceptor) and receives on it:
//
//   connector -> acceptor  HELLO     connector nonce Nc, segment and eager sizes, peer
//                                    timeout, both addresses
//   acceptor  -> connector CHALLENGE acceptor nonce Na, segment and eager sizes, peer
//                                    timeout, MAC(secret, "acceptor", comm, HELLO, CHALLENGE)
//   connector -> acceptor  RESPONSE  MAC(secret, "connector", comm, HELLO, CHALLENGE)
//   acceptor  -> connector ACCEPT    once the acceptor has the communicator's rank table
//
// Either side answers a failed check with REFUSE (reason) and closes; an open session
// ends with BYE (reason, and whether the sender's ranks left or the sender broke the
// communicator). On the session it sends on, an engine tells the peer with DEPART (rank,
// reason) that one of its ranks left while its others stay: nothing more comes from that
// rank, and the session goes on for the others. On an open session each side sends
// HEARTBEAT when it has written nothing for a while, and takes a session on which it heard
// nothing for the session's peer timeout, the smaller of the two announced, as lost
// (hw/poe/tcp/session.h). Nonces are fresh RAND_bytes per session, so a recorded proof
// cannot be replayed; the role label keeps one side's proof from serving as the other's.
// Both proofs cover every field of the HELLO and of the CHALLENGE (but its proof), so a
// change on the way to an address, a nonce, a size or a timeout fails the check. Segments
// after the handshake carry no proof. Control messages travel as the payload of a
// SegmentType::kControl segment.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/crypto.h"
#include "hw/types.h"

namespace cclo::hw::poe {

using Nonce = std::array<uint8_t, 32>;
using Mac = Digest;

/// Longest address or reason a control message carries.
inline constexpr size_t kMaxControlString = 256;
/// Shortest peer timeout a HELLO or CHALLENGE may announce, as the config allows: a
/// shorter one would have the engine, shared by every tenant, tick heartbeats more often
/// than every 200 ms.
inline constexpr uint64_t kMinPeerTimeoutMs = 1'000;
/// Longest peer timeout a HELLO or CHALLENGE may announce: a day.
inline constexpr uint64_t kMaxPeerTimeoutMs = 86'400'000;

enum class ControlKind : uint8_t {
  kHello = 1,
  kChallenge = 2,
  kResponse = 3,
  kAccept = 4,
  kRefuse = 5,
  kBye = 6,
  kHeartbeat = 7,
  kDepart = 8,
};

/// What a BYE says of the communicator.
enum class ByeKind : uint8_t {
  kLeft = 0,   ///< the sender's ranks left it (or the sender lost or refused the session)
  kBroke = 1,  ///< the sender broke it: invalid data, a missed deadline, an operator
};

/// One control message; which fields are meaningful depends on `kind`.
struct ControlMessage {
  ControlKind kind = ControlKind::kHello;
  Nonce nonce{};               ///< hello, challenge: the sender's fresh nonce
  uint64_t segment_bytes = 0;  ///< hello, challenge: the sender's largest segment
  /// hello, challenge: the largest eager message the sender accepts (its credit size; at
  /// most segment_bytes); 0 when it takes none
  uint64_t eager_bytes = 0;
  /// hello, challenge: how long the sender waits on a silent session before it takes it as
  /// lost, ms (kMinPeerTimeoutMs..kMaxPeerTimeoutMs)
  uint64_t timeout_ms = 0;
  std::string connector;  ///< hello: the connector's data address
  std::string acceptor;   ///< hello: the acceptor's data address as the connector knows it
  Mac mac{};              ///< challenge, response: the sender's proof
  std::string reason;     ///< refuse, bye, depart: why
  ByeKind bye = ByeKind::kLeft;  ///< bye: what the sender says of the communicator
  uint32_t rank = 0;             ///< depart: the sender's rank that left

  bool operator==(const ControlMessage&) const = default;
};

/// Lower-case name of a control kind, for logs.
std::string ControlKindName(ControlKind kind);

/// Serializes `message` (strings longer than kMaxControlString are cut).
std::vector<std::byte> EncodeControl(const ControlMessage& message);

/// Parses a control payload; INVALID_ARGUMENT names what is wrong. Which ranks a DEPART
/// may name is the receiver's to check.
absl::StatusOr<ControlMessage> DecodeControl(const std::byte* data, size_t size);

enum class HandshakeRole : uint8_t { kConnector, kAcceptor };

/// The proof `role` sends for a session of `comm` opened by `hello` and answered by
/// `challenge`: an HMAC over both messages' fields, the challenge's `mac` excepted.
Mac HandshakeMac(const CommSecret& secret, HandshakeRole role, const CommId& comm,
                 const ControlMessage& hello, const ControlMessage& challenge);

/// Constant-time comparison of two proofs.
bool MacEqual(const Mac& a, const Mac& b);

/// A fresh random nonce.
Nonce RandomNonce();

}  // namespace cclo::hw::poe
