// TcpSession's handshake: HELLO, CHALLENGE, RESPONSE and ACCEPT as hw/poe/handshake.h
// describes them, plus REFUSE and BYE at any time and HEARTBEAT and DEPART once up.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "hw/poe/tcp/engine.h"
#include "hw/poe/tcp/session.h"
#include "hw/types.h"

namespace cclo::hw::poe::tcp {

absl::Status TcpSession::CheckAnnounced(const ControlMessage& announced) const {
  if (announced.timeout_ms < kMinPeerTimeoutMs || announced.timeout_ms > kMaxPeerTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrCat("peer timeout ", announced.timeout_ms,
                                                   " ms is not in [", kMinPeerTimeoutMs, ", ",
                                                   kMaxPeerTimeoutMs, "]"));
  }
  const uint64_t segment = announced.segment_bytes;
  if (segment < kMinSegmentBytes || segment > kMaxSegmentBytes || segment % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("peer segment size ", segment,
                                                   " is not a multiple of 8 in [", kMinSegmentBytes,
                                                   ", ", kMaxSegmentBytes, "]"));
  }
  if (announced.eager_bytes > segment) {
    return absl::InvalidArgumentError(absl::StrCat("peer eager size ", announced.eager_bytes,
                                                   " exceeds its segment size ", segment));
  }
  return absl::OkStatus();
}

void TcpSession::OnControl() {
  absl::StatusOr<ControlMessage> message = DecodeControl(control_.data(), control_.size());
  if (!message.ok()) return Refuse(message.status());
  const ControlKind kind = message->kind;
  const bool connector = role_ == HandshakeRole::kConnector;
  if (kind == ControlKind::kRefuse) {
    return Fail(absl::PermissionDeniedError(
        absl::StrCat("peer daemon ", EscapeControl(peer_address_),
                     " refused the session: ", EscapeControl(message->reason))));
  }
  if (kind == ControlKind::kBye) {
    const std::string reason = EscapeControl(message->reason);
    return Fail(message->bye == ByeKind::kBroke ? absl::AbortedError(reason)
                                                : absl::CancelledError(reason));
  }
  if (kind == ControlKind::kHeartbeat && state_ == State::kUp) return;  // it was heard
  if (kind == ControlKind::kDepart && state_ == State::kUp) {
    absl::Status status =
        engine_.handler().OnDeparture(*this, message->rank, EscapeControl(message->reason));
    if (state_ != State::kClosed && !status.ok()) Fail(status);
    return;
  }
  if (kind == ControlKind::kHello && !connector && state_ == State::kAwaitHello) {
    comm_ = current_.comm;
    return OnHello(*message);
  }
  if (kind == ControlKind::kChallenge && connector && state_ == State::kAwaitChallenge) {
    return OnChallenge(*message);
  }
  if (kind == ControlKind::kResponse && !connector && state_ == State::kAwaitResponse) {
    return OnResponse(*message);
  }
  if (kind == ControlKind::kAccept && connector && state_ == State::kAwaitAccept) {
    BecomeUp();
    return engine_.handler().OnSessionUp(*this);
  }
  Refuse(absl::InvalidArgumentError(
      absl::StrCat("unexpected ", ControlKindName(kind), " message ",
                   state_ == State::kUp ? "on an open session" : "during the handshake")));
}

void TcpSession::OnHello(const ControlMessage& hello) {
  peer_address_ = hello.connector;
  const std::string& self = engine_.address();
  if (hello.acceptor != self) {
    return Refuse(absl::InvalidArgumentError(absl::StrCat(
        "hello addressed to ", EscapeControl(hello.acceptor), " reached engine ", self)));
  }
  if (absl::Status status = CheckAnnounced(hello); !status.ok()) return Refuse(status);
  absl::StatusOr<CommSecret> secret = engine_.handler().Secret(comm_);
  if (!secret.ok()) {
    return Refuse(
        absl::NotFoundError(absl::StrCat("unknown communicator ", CommIdHex(comm_), " at ", self)));
  }
  secret_ = *secret;
  hello_ = hello;
  segment_bytes_ = std::min(engine_.segment_bytes(), hello.segment_bytes);
  peer_eager_bytes_ = hello.eager_bytes;
  timeout_ = std::min(engine_.peer_timeout(), absl::Milliseconds(hello.timeout_ms));
  state_ = State::kAwaitResponse;
  challenge_ = {.kind = ControlKind::kChallenge,
                .nonce = RandomNonce(),
                .segment_bytes = engine_.segment_bytes(),
                .eager_bytes = engine_.eager_bytes(),
                .timeout_ms = TimeoutMs()};
  ControlMessage proved = challenge_;
  proved.mac = HandshakeMac(secret_, HandshakeRole::kAcceptor, comm_, hello_, challenge_);
  SendControl(proved);
}

void TcpSession::OnChallenge(const ControlMessage& challenge) {
  challenge_ = challenge;
  challenge_.mac = {};
  const Mac expected = HandshakeMac(secret_, HandshakeRole::kAcceptor, comm_, hello_, challenge_);
  if (!MacEqual(expected, challenge.mac)) {
    return Refuse(absl::UnauthenticatedError(
        absl::StrCat("authentication failed: peer daemon ", EscapeControl(peer_address_),
                     " does not prove the secret of communicator ", CommIdHex(comm_))));
  }
  if (absl::Status status = CheckAnnounced(challenge); !status.ok()) return Refuse(status);
  segment_bytes_ = std::min(engine_.segment_bytes(), challenge.segment_bytes);
  peer_eager_bytes_ = challenge.eager_bytes;
  timeout_ = std::min(engine_.peer_timeout(), absl::Milliseconds(challenge.timeout_ms));
  engine_.HandshakeFinished(id_);
  state_ = State::kAwaitAccept;
  SendControl({.kind = ControlKind::kResponse,
               .mac = HandshakeMac(secret_, HandshakeRole::kConnector, comm_, hello_, challenge_)});
}

void TcpSession::OnResponse(const ControlMessage& response) {
  const Mac expected = HandshakeMac(secret_, HandshakeRole::kConnector, comm_, hello_, challenge_);
  if (!MacEqual(expected, response.mac)) {
    return Refuse(absl::UnauthenticatedError(
        absl::StrCat("authentication failed: peer daemon ", EscapeControl(peer_address_),
                     " does not prove the secret of communicator ", CommIdHex(comm_))));
  }
  // Its handshake deadline and slot stay until it is admitted: a session that waits for
  // its communicator holds a descriptor, and whoever has the secret can open many.
  state_ = State::kParked;
  engine_.handler().OnAuthenticated(*this);
}

}  // namespace cclo::hw::poe::tcp
