// EmuDevice against a hand-driven peer on a raw socket: what the device does with
// handshakes and segments that a well-behaved engine would never send, and with a peer
// that leaves in the middle of the stream.
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/poe/handshake.h"
#include "hw/poe/wire.h"
#include "tests/hw/emu/device_harness.h"
#include "tests/hw/emu/fake_peer.h"

namespace cclo::hw::emu::testing {
namespace {

using poe::ControlKind;
using poe::ControlMessage;
using poe::SegmentHeader;
using ::testing::HasSubstr;

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

TEST_F(EmuWireTest, WhatAPeerSentBeforeItsByeIsReceivedEvenWhilePaused) {
  EmuConfig config = TestConfig();
  config.segment_bytes = 4096;
  config.rx_pool_bytes = 2 * 4096;  // the session pauses after two segments
  Start(config);
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  const std::vector<std::byte> message = [] {
    std::vector<std::byte> bytes(5 * 4096);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(i * 29);
    return bytes;
  }();
  for (uint64_t offset = 0; offset < message.size(); offset += 4096) {
    peer.SendSegment(
        peer.Data(offset, message.size()),
        std::vector<std::byte>(message.begin() + offset, message.begin() + offset + 4096));
  }
  peer.SendControl({.kind = ControlKind::kBye, .reason = "tenant finished"});
  // The pool is full, so the device stops reading at the third segment; only then does
  // the peer hang up.
  const absl::Time give_up = absl::Now() + kWait;
  while (device_->Stats().rx_pool_bytes_used < 2 * 4096 && absl::Now() < give_up) {
    std::this_thread::yield();
  }
  ASSERT_EQ(device_->Stats().rx_pool_bytes_used, 2 * 4096u);
  peer.Hangup();
  RankBuffers buffers;
  auto received = PostRecv(buffers, message.size() / 4);
  Completion done = Wait(received);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_EQ(buffers.slots[2], message);
  // Once the BYE is read, rank 0 has left; nothing more comes from it.
  RankBuffers more;
  auto next = PostRecv(more, 4);
  EXPECT_EQ(Wait(next).status,
            absl::UnavailableError("rank 0 on peer daemon 127.0.0.1:1 left: tenant finished"));
  EXPECT_EQ(device_->Stats().rx_pool_bytes_used, 0u);
  EXPECT_EQ(device_->Stats().wire_errors, 0u);
}

TEST_F(EmuWireTest, PeerVanishingMidMessageFailsTheReceiveAsLost) {
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  peer.SendSegment(peer.Data(0, 64, 0), std::vector<std::byte>(64, std::byte{1}));  // whole
  peer.SendSegment(peer.Data(0, 64, 1), std::vector<std::byte>(32, std::byte{2}));  // half
  peer.Hangup();
  RankBuffers whole, half;
  auto first = PostRecv(whole, 16);
  EXPECT_TRUE(Wait(first).status.ok());
  EXPECT_EQ(whole.slots[2], std::vector<std::byte>(64, std::byte{1}));
  auto second = PostRecv(half, 16);
  Completion lost = Wait(second);
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(lost.status.message(), HasSubstr("lost peer daemon 127.0.0.1:1 (rank 0)"));
  EXPECT_THAT(lost.status.message(), HasSubstr("connection closed by peer"));
  EXPECT_EQ(device_->Stats().rx_pool_bytes_used, 0u);
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
