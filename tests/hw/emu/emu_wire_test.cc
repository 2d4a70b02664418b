// EmuDevice against a hand-driven peer on a raw socket: what the device does with
// handshakes and segments that a well-behaved engine would never send.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/poe/handshake.h"
#include "hw/poe/wire.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {
namespace {

using poe::ControlKind;
using poe::ControlMessage;
using poe::SegmentHeader;
using ::testing::HasSubstr;

/// Smaller than any "127.0.0.1:<port>" the device gets, so the fake peer connects.
constexpr char kFakeAddress[] = "127.0.0.1:1";

/// A peer engine played by the test over a blocking socket.
class FakePeer {
 public:
  FakePeer(const std::string& device_address, const TestComm& comm)
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
  ~FakePeer() { close(fd_); }

  void Write(const void* data, size_t size) {
    ASSERT_EQ(send(fd_, data, size, MSG_NOSIGNAL), static_cast<ssize_t>(size));
  }
  void SendSegment(SegmentHeader header, const std::vector<std::byte>& payload) {
    header.length = static_cast<uint32_t>(payload.size());
    const poe::EncodedHeader bytes = poe::Encode(header);
    Write(bytes.data(), bytes.size());
    if (!payload.empty()) Write(payload.data(), payload.size());
  }
  void SendControl(const ControlMessage& message) {
    SegmentHeader header{.type = poe::SegmentType::kControl, .comm = comm_.config.id};
    const std::vector<std::byte> payload = poe::EncodeControl(message);
    header.total = payload.size();
    SendSegment(header, payload);
  }
  /// Reads exactly `size` bytes; false on EOF or error.
  bool Read(void* data, size_t size) {
    auto* out = static_cast<char*>(data);
    while (size > 0) {
      const ssize_t n = recv(fd_, out, size, 0);
      if (n <= 0) return false;
      out += n;
      size -= n;
    }
    return true;
  }
  absl::StatusOr<ControlMessage> ReadControl() {
    poe::EncodedHeader bytes;
    if (!Read(bytes.data(), bytes.size())) return absl::UnavailableError("closed");
    absl::StatusOr<SegmentHeader> header = poe::Decode(bytes.data(), bytes.size());
    if (!header.ok()) return header.status();
    std::vector<std::byte> payload(header->length);
    if (!Read(payload.data(), payload.size())) return absl::UnavailableError("closed");
    return poe::DecodeControl(payload.data(), payload.size());
  }
  /// Runs the connector's side up to and including RESPONSE; `secret` proves membership.
  void Authenticate(const CommSecret& secret) {
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
  /// A data segment from the fake's rank 0 to the device's rank 1, tag 1.
  SegmentHeader Data(uint64_t offset, uint64_t total, uint64_t sequence = 0) const {
    return {.type = poe::SegmentType::kEagerData,
            .comm = comm_.config.id,
            .src = 0,
            .dst = 1,
            .tag = 1,
            .sequence = sequence,
            .offset = offset,
            .total = total};
  }

 private:
  std::string device_address_;
  const TestComm& comm_;
  int fd_ = -1;
};

class EmuWireTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(TestConfig()); }

  void Start(const EmuConfig& config) {
    devices_ = MakeDevices(1, config);
    ASSERT_EQ(devices_.size(), 1u);
    device_ = devices_[0].get();
    comm_ = MakeComm({device_, device_}, 31);
    comm_.config.ranks[0].data_address = kFakeAddress;
    ASSERT_TRUE(device_->PrepareCommunicator(comm_.config.id, comm_.config.secret).ok());
  }

  /// Configures the device and completes the fake's handshake.
  void Connect(FakePeer& peer) {
    auto promise = std::make_shared<std::promise<absl::Status>>();
    std::future<absl::Status> configured = promise->get_future();
    device_->ConfigureCommunicator(comm_.config, absl::Now() + kWait,
                                   [promise](absl::Status s) { promise->set_value(s); });
    peer.Authenticate(comm_.config.secret);
    absl::StatusOr<ControlMessage> accept = peer.ReadControl();
    ASSERT_TRUE(accept.ok()) << accept.status();
    EXPECT_EQ(accept->kind, ControlKind::kAccept);
    ASSERT_EQ(configured.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    ASSERT_TRUE(configured.get().ok());
  }

  /// Posts a receive of `floats` elements at rank 1 from the fake's rank 0.
  std::future<Completion> PostRecv(RankBuffers& buffers, uint64_t floats) {
    buffers.slots[2].resize(floats * 4);
    CallDescriptor call = Describe(comm_, Collective::kRecv, 1, floats);
    call.peer = 0;
    call.tag = 1;
    return Submit(*device_, call, buffers.Views());
  }

  std::vector<DevicePtr> devices_;
  Device* device_ = nullptr;
  TestComm comm_;
};

TEST_F(EmuWireTest, ParkedHandshakeCompletesWhenConfigured) {
  FakePeer peer(device_->DataAddress(), comm_);
  peer.Authenticate(comm_.config.secret);  // the device only knows the secret so far
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> configured = promise->get_future();
  device_->ConfigureCommunicator(comm_.config, absl::Now() + kWait,
                                 [promise](absl::Status s) { promise->set_value(s); });
  absl::StatusOr<ControlMessage> accept = peer.ReadControl();
  ASSERT_TRUE(accept.ok()) << accept.status();
  EXPECT_EQ(accept->kind, ControlKind::kAccept);
  EXPECT_TRUE(configured.get().ok());
  EXPECT_EQ(device_->Stats().sessions_up, 1u);
}

TEST_F(EmuWireTest, DataFlowsAndBackPressureKeepsItIntact) {
  EmuConfig config = TestConfig();
  config.segment_bytes = 4096;
  config.rx_pool_bytes = 2 * 4096;  // room for two early segments only
  Start(config);
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  std::vector<std::byte> message(5 * 4096);
  for (size_t i = 0; i < message.size(); ++i) message[i] = std::byte(i * 13);
  for (uint64_t offset = 0; offset < message.size(); offset += 4096) {
    peer.SendSegment(
        peer.Data(offset, message.size()),
        std::vector<std::byte>(message.begin() + offset, message.begin() + offset + 4096));
  }
  RankBuffers buffers;
  auto received = PostRecv(buffers, message.size() / 4);
  EXPECT_TRUE(Wait(received).status.ok());
  EXPECT_EQ(buffers.slots[2], message);
  EXPECT_EQ(device_->Stats().rx_pool_bytes_used, 0u);
  EXPECT_EQ(device_->Stats().bytes_received, message.size());
}

TEST_F(EmuWireTest, SegmentFromARankThePeerDoesNotHostBreaksTheCommunicator) {
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  RankBuffers buffers;
  auto pending = PostRecv(buffers, 4);
  SegmentHeader forged = peer.Data(0, 16);
  forged.src = 1;  // the device's own rank
  peer.SendSegment(forged, std::vector<std::byte>(16));
  Completion failed = Wait(pending);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status.message(),
              HasSubstr("invalid data from peer daemon 127.0.0.1:1 (rank 0)"));
  EXPECT_THAT(failed.status.message(), HasSubstr("segment from rank 1"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
  absl::StatusOr<ControlMessage> bye = peer.ReadControl();  // the device says why, then closes
  ASSERT_TRUE(bye.ok()) << bye.status();
  EXPECT_EQ(bye->kind, ControlKind::kBye);
  EXPECT_THAT(bye->reason, HasSubstr("segment from rank 1"));
  char byte;
  EXPECT_FALSE(peer.Read(&byte, 1));
}

TEST_F(EmuWireTest, MessageLargerThanThePostedReceiveBreaksTheCommunicator) {
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  RankBuffers buffers;
  auto pending = PostRecv(buffers, 4);
  // Sent after the receive may or may not be posted; either way it must not fit.
  peer.SendSegment(peer.Data(0, 64), std::vector<std::byte>(64));
  Completion failed = Wait(pending);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status.message(), HasSubstr("posted receive expects 16"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
}

TEST_F(EmuWireTest, GarbageHeaderBreaksTheCommunicator) {
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  RankBuffers buffers;
  auto pending = PostRecv(buffers, 4);
  const std::vector<uint8_t> garbage(poe::kHeaderBytes, 0xFF);
  peer.Write(garbage.data(), garbage.size());
  Completion failed = Wait(pending);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status.message(), HasSubstr("invalid data from peer daemon 127.0.0.1:1"));
  EXPECT_THAT(failed.status.message(), HasSubstr("bad magic 0xffffffff"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
}

TEST_F(EmuWireTest, WrongProofIsRefusedByTheAcceptor) {
  FakePeer peer(device_->DataAddress(), comm_);
  CommSecret wrong = comm_.config.secret;
  wrong[5] ^= 0x40;
  peer.Authenticate(wrong);
  absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_THAT(refusal->reason, HasSubstr("authentication failed"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
  EXPECT_EQ(device_->Stats().sessions_up, 0u);
}

TEST_F(EmuWireTest, HelloForAnUnknownCommunicatorIsRefused) {
  TestComm other = comm_;
  other.config.id[0] ^= 1;
  FakePeer peer(device_->DataAddress(), other);
  peer.SendControl({.kind = ControlKind::kHello,
                    .segment_bytes = 4096,
                    .connector = kFakeAddress,
                    .acceptor = device_->DataAddress()});
  absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_THAT(refusal->reason, HasSubstr("unknown communicator"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
}

TEST_F(EmuWireTest, SilentConnectionMissesTheHandshakeDeadline) {
  EmuConfig config = TestConfig();
  config.handshake_timeout = absl::Milliseconds(100);
  Start(config);
  FakePeer peer(device_->DataAddress(), comm_);
  char byte;
  EXPECT_FALSE(peer.Read(&byte, 1));  // the device hangs up
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
}

}  // namespace
}  // namespace cclo::hw::emu::testing
