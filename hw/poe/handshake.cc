#include "hw/poe/handshake.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "hw/crypto.h"

namespace cclo::hw::poe {
namespace {

class Writer {
 public:
  void Byte(uint8_t value) { out_.push_back(static_cast<std::byte>(value)); }
  void U32(uint32_t value) {
    for (int i = 0; i < 4; ++i) Byte(static_cast<uint8_t>(value >> (8 * i)));
  }
  void U64(uint64_t value) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<uint8_t>(value >> (8 * i)));
  }
  template <size_t N>
  void Bytes(const std::array<uint8_t, N>& bytes) {
    for (uint8_t b : bytes) Byte(b);
  }
  void String(const std::string& text) {
    const size_t size = std::min(text.size(), kMaxControlString);
    Byte(static_cast<uint8_t>(size));
    Byte(static_cast<uint8_t>(size >> 8));
    for (size_t i = 0; i < size; ++i) Byte(static_cast<uint8_t>(text[i]));
  }
  std::vector<std::byte> Take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(const std::byte* data, size_t size) : data_(data), size_(size) {}
  bool Byte(uint8_t* value) {
    if (pos_ >= size_) return false;
    *value = static_cast<uint8_t>(data_[pos_++]);
    return true;
  }
  bool U32(uint32_t* value) {
    if (size_ - pos_ < 4) return false;
    *value = 0;
    for (int i = 0; i < 4; ++i) *value |= static_cast<uint32_t>(data_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool U64(uint64_t* value) {
    if (size_ - pos_ < 8) return false;
    *value = 0;
    for (int i = 0; i < 8; ++i) *value |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return true;
  }
  template <size_t N>
  bool Bytes(std::array<uint8_t, N>* bytes) {
    if (size_ - pos_ < N) return false;
    std::memcpy(bytes->data(), data_ + pos_, N);
    pos_ += N;
    return true;
  }
  bool String(std::string* text) {
    uint8_t lo = 0, hi = 0;
    if (!Byte(&lo) || !Byte(&hi)) return false;
    const size_t size = lo | (size_t{hi} << 8);
    if (size > kMaxControlString || size_ - pos_ < size) return false;
    text->assign(reinterpret_cast<const char*>(data_ + pos_), size);
    pos_ += size;
    return true;
  }
  bool AtEnd() const { return pos_ == size_; }

 private:
  const std::byte* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

std::string ControlKindName(ControlKind kind) {
  switch (kind) {
    case ControlKind::kHello:
      return "hello";
    case ControlKind::kChallenge:
      return "challenge";
    case ControlKind::kResponse:
      return "response";
    case ControlKind::kAccept:
      return "accept";
    case ControlKind::kRefuse:
      return "refuse";
    case ControlKind::kBye:
      return "bye";
    case ControlKind::kHeartbeat:
      return "heartbeat";
    case ControlKind::kDepart:
      return "depart";
  }
  return absl::StrCat("kind ", static_cast<int>(kind));
}

std::vector<std::byte> EncodeControl(const ControlMessage& m) {
  Writer w;
  w.Byte(static_cast<uint8_t>(m.kind));
  switch (m.kind) {
    case ControlKind::kHello:
      w.Bytes(m.nonce);
      w.U64(m.segment_bytes);
      w.U64(m.eager_bytes);
      w.U64(m.timeout_ms);
      w.String(m.connector);
      w.String(m.acceptor);
      break;
    case ControlKind::kChallenge:
      w.Bytes(m.nonce);
      w.U64(m.segment_bytes);
      w.U64(m.eager_bytes);
      w.U64(m.timeout_ms);
      w.Bytes(m.mac);
      break;
    case ControlKind::kResponse:
      w.Bytes(m.mac);
      break;
    case ControlKind::kAccept:
    case ControlKind::kHeartbeat:
      break;
    case ControlKind::kRefuse:
      w.String(m.reason);
      break;
    case ControlKind::kBye:
      w.Byte(static_cast<uint8_t>(m.bye));
      w.String(m.reason);
      break;
    case ControlKind::kDepart:
      w.U32(m.rank);
      w.String(m.reason);
      break;
  }
  return w.Take();
}

absl::StatusOr<ControlMessage> DecodeControl(const std::byte* data, size_t size) {
  Reader r(data, size);
  uint8_t kind = 0;
  if (!r.Byte(&kind)) return absl::InvalidArgumentError("empty control message");
  if (kind < static_cast<uint8_t>(ControlKind::kHello) ||
      kind > static_cast<uint8_t>(ControlKind::kDepart)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown control message kind ", kind));
  }
  ControlMessage m;
  m.kind = static_cast<ControlKind>(kind);
  bool ok = true;
  uint8_t bye = 0;
  switch (m.kind) {
    case ControlKind::kHello:
      ok = r.Bytes(&m.nonce) && r.U64(&m.segment_bytes) && r.U64(&m.eager_bytes) &&
           r.U64(&m.timeout_ms) && r.String(&m.connector) && r.String(&m.acceptor);
      break;
    case ControlKind::kChallenge:
      ok = r.Bytes(&m.nonce) && r.U64(&m.segment_bytes) && r.U64(&m.eager_bytes) &&
           r.U64(&m.timeout_ms) && r.Bytes(&m.mac);
      break;
    case ControlKind::kResponse:
      ok = r.Bytes(&m.mac);
      break;
    case ControlKind::kAccept:
    case ControlKind::kHeartbeat:
      break;
    case ControlKind::kRefuse:
      ok = r.String(&m.reason);
      break;
    case ControlKind::kBye:
      ok = r.Byte(&bye) && r.String(&m.reason);
      m.bye = static_cast<ByeKind>(bye);
      break;
    case ControlKind::kDepart:
      ok = r.U32(&m.rank) && r.String(&m.reason);
      break;
  }
  if (!ok || !r.AtEnd()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed ", ControlKindName(m.kind), " message of ", size, " bytes"));
  }
  if (bye > static_cast<uint8_t>(ByeKind::kBroke)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bye message says ", bye, " of the communicator: 0 (ranks left) or 1 (broke it)"));
  }
  return m;
}

Mac HandshakeMac(const CommSecret& secret, HandshakeRole role, const CommId& comm,
                 const ControlMessage& hello, const ControlMessage& challenge) {
  Writer w;
  const std::string label =
      role == HandshakeRole::kConnector ? "cclo-v1 connector" : "cclo-v1 acceptor";
  w.String(label);
  w.Bytes(comm);
  w.String(hello.connector);
  w.String(hello.acceptor);
  for (const ControlMessage* m : {&hello, &challenge}) {
    w.Bytes(m->nonce);
    w.U64(m->segment_bytes);
    w.U64(m->eager_bytes);
    w.U64(m->timeout_ms);
  }
  const std::vector<std::byte> message = w.Take();
  return Hmac(secret.data(), secret.size(), message.data(), message.size());
}

bool MacEqual(const Mac& a, const Mac& b) {
  return ConstantTimeEqual(a.data(), b.data(), a.size());
}

Nonce RandomNonce() {
  Nonce nonce{};
  RandomBytes(nonce.data(), nonce.size());
  return nonce;
}

}  // namespace cclo::hw::poe
