#include "tests/hw/emu/fake_peer.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hw/clock.h"
#include "tests/loopback/loopback.h"

namespace cclo::hw::emu::testing {

using poe::ControlKind;
using poe::ControlMessage;
using poe::SegmentHeader;
using poe::SegmentType;

namespace {

/// A device that never answers fails the test, not hangs it.
void SetTimeoutAndNoDelay(int fd) {
  timeval timeout{60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

FakePeer::FakePeer(const std::string& device_address, const TestComm& comm)
    : device_address_(device_address),
      comm_(comm),
      address_(comm.config.ranks.empty() ? kFakeAddress : comm.config.ranks[0].data_address) {
  out_fd_ = cclo::testing::ConnectLoopback(device_address);
  EXPECT_GE(out_fd_, 0) << std::strerror(errno);
  SetTimeoutAndNoDelay(out_fd_);
}

FakePeer::~FakePeer() { Hangup(); }

void FakePeer::Hangup() {
  for (int* fd : {&out_fd_, &in_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void FakePeer::HangupBack() {
  if (in_fd_ >= 0) close(in_fd_);
  in_fd_ = -1;
}

bool FakePeer::EndBack() {
  shutdown(in_fd_, SHUT_WR);
  char byte;
  const bool closed = recv(in_fd_, &byte, 1, 0) == 0;  // bounded by SO_RCVTIMEO
  HangupBack();
  return closed;
}

bool FakePeer::WaitUntilRead() {
  sockaddr_in mine{}, device{};
  socklen_t length = sizeof(mine);
  getsockname(out_fd_, reinterpret_cast<sockaddr*>(&mine), &length);
  length = sizeof(device);
  getpeername(out_fd_, reinterpret_cast<sockaddr*>(&device), &length);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cclo::testing::UnreadAt(ntohs(device.sin_port), ntohs(mine.sin_port)) != 0) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void FakePeer::WriteOn(int fd, const void* data, size_t size) {
  ASSERT_EQ(send(fd, data, size, MSG_NOSIGNAL), static_cast<ssize_t>(size));
}

void FakePeer::Write(const void* data, size_t size) { WriteOn(out_fd_, data, size); }

void FakePeer::SendOn(int fd, SegmentHeader header, const std::vector<std::byte>& payload) {
  header.length = static_cast<uint32_t>(payload.size());
  const poe::EncodedHeader bytes = poe::Encode(header);
  WriteOn(fd, bytes.data(), bytes.size());
  if (!payload.empty()) WriteOn(fd, payload.data(), payload.size());
}

void FakePeer::SendSegment(SegmentHeader header, const std::vector<std::byte>& payload) {
  SendOn(out_fd_, header, payload);
}

void FakePeer::SendBack(SegmentHeader header, const std::vector<std::byte>& payload) {
  SendOn(in_fd_, header, payload);
}

void FakePeer::SendControlOn(int fd, const ControlMessage& message) {
  SegmentHeader header{.type = SegmentType::kControl, .comm = comm_.config.id};
  const std::vector<std::byte> payload = poe::EncodeControl(message);
  header.total = payload.size();
  SendOn(fd, header, payload);
}

void FakePeer::SendControl(const ControlMessage& message) { SendControlOn(out_fd_, message); }

void FakePeer::Bye(const std::string& reason, poe::ByeKind kind) {
  SendControlOn(in_fd_, {.kind = ControlKind::kBye, .reason = reason, .bye = kind});
  SendControlOn(out_fd_, {.kind = ControlKind::kBye, .reason = reason, .bye = kind});
}

void FakePeer::Grant(uint64_t credits) {
  SendSegment({.type = SegmentType::kCredit, .comm = comm_.config.id, .total = credits});
}

bool FakePeer::Read(void* data, size_t size) {
  auto* out = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(in_fd_ >= 0 ? in_fd_ : out_fd_, out, size, 0);
    if (n <= 0) return false;
    out += n;
    size -= n;
  }
  return true;
}

absl::StatusOr<SegmentHeader> FakePeer::ReadSegment(std::vector<std::byte>* payload) {
  while (true) {
    poe::EncodedHeader bytes;
    if (!Read(bytes.data(), bytes.size())) return absl::UnavailableError("closed");
    absl::StatusOr<SegmentHeader> header = poe::Decode(bytes.data(), bytes.size());
    if (!header.ok()) return header.status();
    std::vector<std::byte> data(header->length);
    if (!Read(data.data(), data.size())) return absl::UnavailableError("closed");
    if (header->type == SegmentType::kControl) {
      absl::StatusOr<ControlMessage> control = poe::DecodeControl(data.data(), data.size());
      if (control.ok() && control->kind == ControlKind::kHeartbeat) {
        ++heartbeats_;
        continue;
      }
    }
    if (header->type == SegmentType::kCredit) credits_ += header->total;
    if (payload != nullptr) *payload = std::move(data);
    return header;
  }
}

absl::StatusOr<SegmentHeader> FakePeer::ReadUntil(SegmentType type) {
  while (true) {
    absl::StatusOr<SegmentHeader> header = ReadSegment();
    if (!header.ok() || header->type == type) return header;
  }
}

absl::StatusOr<ControlMessage> FakePeer::ReadControl() {
  std::vector<std::byte> payload;
  absl::StatusOr<SegmentHeader> header = ReadSegment(&payload);
  while (header.ok() && header->type == SegmentType::kCredit) header = ReadSegment(&payload);
  if (!header.ok()) return header.status();
  if (header->type != SegmentType::kControl) {
    return absl::InternalError("expected a control segment, got " + poe::Describe(*header));
  }
  return poe::DecodeControl(payload.data(), payload.size());
}

void FakePeer::Authenticate(const CommSecret& secret, uint64_t timeout_ms) {
  const ControlMessage hello{.kind = ControlKind::kHello,
                             .nonce = {9, 9, 9},
                             .segment_bytes = 64 << 10,
                             .eager_bytes = 64 << 10,
                             .timeout_ms = timeout_ms,
                             .connector = address_,
                             .acceptor = device_address_};
  SendControl(hello);
  absl::StatusOr<ControlMessage> challenge = ReadControl();
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  ASSERT_EQ(challenge->kind, ControlKind::kChallenge);
  ControlMessage unproved = *challenge;
  unproved.mac = {};
  EXPECT_TRUE(poe::MacEqual(challenge->mac,
                            poe::HandshakeMac(comm_.config.secret, poe::HandshakeRole::kAcceptor,
                                              comm_.config.id, hello, unproved)));
  SendControl({.kind = ControlKind::kResponse,
               .mac = poe::HandshakeMac(secret, poe::HandshakeRole::kConnector, comm_.config.id,
                                        hello, unproved)});
}

void FakePeer::AnswerHello(int listener, uint64_t proved_segment_bytes) {
  pollfd ready{listener, POLLIN, 0};
  ASSERT_EQ(poll(&ready, 1, 60'000), 1) << "the device did not connect to the fake";
  in_fd_ = accept(listener, nullptr, nullptr);
  ASSERT_GE(in_fd_, 0);
  SetTimeoutAndNoDelay(in_fd_);
  absl::StatusOr<ControlMessage> hello = ReadControl();
  ASSERT_TRUE(hello.ok()) << hello.status();
  ASSERT_EQ(hello->kind, ControlKind::kHello);
  EXPECT_EQ(hello->connector, device_address_);
  EXPECT_EQ(hello->acceptor, address_);
  hello_ = *hello;
  challenge_ = {.kind = ControlKind::kChallenge,
                .nonce = {7, 7, 7},
                .segment_bytes = 64 << 10,
                .eager_bytes = 64 << 10,
                .timeout_ms = poe::kMaxPeerTimeoutMs};
  ControlMessage proved = challenge_;
  proved.segment_bytes = proved_segment_bytes;
  ControlMessage sent = challenge_;
  sent.mac = poe::HandshakeMac(comm_.config.secret, poe::HandshakeRole::kAcceptor, comm_.config.id,
                               hello_, proved);
  SendControlOn(in_fd_, sent);
}

void FakePeer::AcceptDevice(int listener) {
  ASSERT_NO_FATAL_FAILURE(AnswerHello(listener));
  absl::StatusOr<ControlMessage> response = ReadControl();
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->kind, ControlKind::kResponse);
  EXPECT_TRUE(poe::MacEqual(response->mac,
                            poe::HandshakeMac(comm_.config.secret, poe::HandshakeRole::kConnector,
                                              comm_.config.id, hello_, challenge_)));
  SendControlOn(in_fd_, {.kind = ControlKind::kAccept});
}

SegmentHeader FakePeer::Message(SegmentType type, uint64_t total, uint64_t sequence,
                                uint64_t offset) const {
  SegmentHeader header{.type = type,
                       .comm = comm_.config.id,
                       .src = 0,
                       .dst = 1,
                       .tag = 1,
                       .sequence = sequence,
                       .offset = offset,
                       .total = total};
  // The first segment of a message says what call sent it: a send, as tag 1 is one's.
  if (type == SegmentType::kEagerData || type == SegmentType::kRequest) {
    header.call = {.collective = Collective::kSend};
  }
  return header;
}

FakePeerTest::~FakePeerTest() {
  if (listener_ >= 0) close(listener_);
}

void FakePeerTest::Start(const EmuConfig& config) {
  devices_ = MakeDevices(1, config);
  ASSERT_EQ(devices_.size(), 1u);
  device_ = devices_[0].get();
  if (listener_ < 0) {
    listener_ = cclo::testing::ListenLoopback(&fake_address_);
    ASSERT_GE(listener_, 0) << std::strerror(errno);
  }
  comm_ = MakeComm({device_, device_}, 31);
  comm_.config.ranks[0].data_address = fake_address_;
  ASSERT_TRUE(device_->PrepareCommunicator(comm_.config.id, comm_.config.secret).ok());
}

std::future<absl::Status> FakePeerTest::Configure() {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> configured = promise->get_future();
  device_->ConfigureCommunicator(comm_.config, hw::SteadyNow() + kWait,
                                 [promise](absl::Status s) { promise->set_value(s); });
  return configured;
}

std::future<absl::Status> FakePeerTest::Admit(FakePeer& peer) {
  std::future<absl::Status> configured = Configure();
  peer.Authenticate(comm_.config.secret);
  absl::StatusOr<ControlMessage> accept = peer.ReadControl();
  EXPECT_TRUE(accept.ok()) << accept.status();
  if (accept.ok()) EXPECT_EQ(accept->kind, ControlKind::kAccept);
  return configured;
}

void FakePeerTest::Connect(FakePeer& peer, uint64_t credits) {
  std::future<absl::Status> configured = Admit(peer);
  peer.Grant(credits);
  ASSERT_NO_FATAL_FAILURE(peer.AcceptDevice(listener_));
  absl::StatusOr<SegmentHeader> grant = peer.ReadSegment();  // the device's grant
  ASSERT_TRUE(grant.ok()) << grant.status();
  ASSERT_EQ(grant->type, SegmentType::kCredit);
  ASSERT_EQ(configured.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  ASSERT_TRUE(configured.get().ok());
}

std::future<Completion> FakePeerTest::PostRecv(RankBuffers& buffers, uint64_t bytes) {
  buffers.slots[2].resize(bytes);
  CallDescriptor call = Describe(comm_, Collective::kRecv, 1, bytes, DataType::kUint8);
  call.peer = 0;
  call.tag = 1;
  return Submit(*device_, call, buffers.Views());
}

std::vector<std::byte> Pattern(size_t count, int seed) {
  std::vector<std::byte> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = std::byte((i * 13 + seed) % 251);
  return data;
}

}  // namespace cclo::hw::emu::testing
