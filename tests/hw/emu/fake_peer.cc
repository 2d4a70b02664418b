#include "tests/hw/emu/fake_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace cclo::hw::emu::testing {

using poe::ControlKind;
using poe::ControlMessage;
using poe::SegmentHeader;

FakePeer::FakePeer(const std::string& device_address, const TestComm& comm)
    : device_address_(device_address), comm_(comm) {
  fd_ = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{60, 0};  // a device that never answers fails the test, not hangs it
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(std::stoi(device_address.substr(device_address.rfind(':') + 1)));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
}

FakePeer::~FakePeer() { Hangup(); }

void FakePeer::Hangup() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void FakePeer::Write(const void* data, size_t size) {
  ASSERT_EQ(send(fd_, data, size, MSG_NOSIGNAL), static_cast<ssize_t>(size));
}

void FakePeer::SendSegment(SegmentHeader header, const std::vector<std::byte>& payload) {
  header.length = static_cast<uint32_t>(payload.size());
  const poe::EncodedHeader bytes = poe::Encode(header);
  Write(bytes.data(), bytes.size());
  if (!payload.empty()) Write(payload.data(), payload.size());
}

void FakePeer::SendControl(const ControlMessage& message) {
  SegmentHeader header{.type = poe::SegmentType::kControl, .comm = comm_.config.id};
  const std::vector<std::byte> payload = poe::EncodeControl(message);
  header.total = payload.size();
  SendSegment(header, payload);
}

bool FakePeer::Read(void* data, size_t size) {
  auto* out = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(fd_, out, size, 0);
    if (n <= 0) return false;
    out += n;
    size -= n;
  }
  return true;
}

absl::StatusOr<ControlMessage> FakePeer::ReadControl() {
  poe::EncodedHeader bytes;
  if (!Read(bytes.data(), bytes.size())) return absl::UnavailableError("closed");
  absl::StatusOr<SegmentHeader> header = poe::Decode(bytes.data(), bytes.size());
  if (!header.ok()) return header.status();
  std::vector<std::byte> payload(header->length);
  if (!Read(payload.data(), payload.size())) return absl::UnavailableError("closed");
  return poe::DecodeControl(payload.data(), payload.size());
}

void FakePeer::Authenticate(const CommSecret& secret) {
  const poe::Nonce nonce{9, 9, 9};
  SendControl({.kind = ControlKind::kHello,
               .nonce = nonce,
               .segment_bytes = 64 << 10,
               .connector = kFakeAddress,
               .acceptor = device_address_});
  absl::StatusOr<ControlMessage> challenge = ReadControl();
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  ASSERT_EQ(challenge->kind, ControlKind::kChallenge);
  const poe::Mac expected =
      poe::HandshakeMac(comm_.config.secret, poe::HandshakeRole::kAcceptor, comm_.config.id,
                        kFakeAddress, device_address_, nonce, challenge->nonce);
  EXPECT_TRUE(poe::MacEqual(expected, challenge->mac));
  SendControl({.kind = ControlKind::kResponse,
               .mac = poe::HandshakeMac(secret, poe::HandshakeRole::kConnector, comm_.config.id,
                                        kFakeAddress, device_address_, nonce, challenge->nonce)});
}

SegmentHeader FakePeer::Data(uint64_t offset, uint64_t total, uint64_t sequence) const {
  return {.type = poe::SegmentType::kEagerData,
          .comm = comm_.config.id,
          .src = 0,
          .dst = 1,
          .tag = 1,
          .sequence = sequence,
          .offset = offset,
          .total = total};
}

}  // namespace cclo::hw::emu::testing
