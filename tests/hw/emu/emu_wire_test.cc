// EmuDevice against a hand-driven peer on a raw socket: handshakes, eager and rendezvous
// messages as the wire carries them, credits, and a peer that leaves in the middle of the
// stream.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/poe/handshake.h"
#include "hw/poe/tcp/engine.h"
#include "hw/poe/wire.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "tests/hw/emu/device_harness.h"
#include "tests/hw/emu/fake_peer.h"
#include "tests/loopback/loopback.h"

namespace cclo::hw::emu::testing {
namespace {

using poe::ControlKind;
using poe::ControlMessage;
using poe::SegmentHeader;
using poe::SegmentType;
using ::testing::Contains;
using ::testing::HasSubstr;

class EmuWireTest : public FakePeerTest {
 protected:
  /// A header of garbage on the fake's session fails a pending receive as invalid data.
  void ExpectGarbageBreaks(FakePeer& peer) {
    RankBuffers buffers;
    auto pending = PostRecv(buffers, 16);
    const std::vector<uint8_t> garbage(poe::kHeaderBytes, 0xFF);
    peer.Write(garbage.data(), garbage.size());
    Completion failed = Wait(pending);
    EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(failed.status.message(),
                HasSubstr(absl::StrCat("invalid data from peer daemon ", fake_address_)));
    EXPECT_THAT(failed.status.message(), HasSubstr("bad magic 0xffffffff"));
    EXPECT_EQ(device_->Stats().wire_errors, 1u);
  }

  /// The device's next control message to `peer` refuses it for its proof.
  static void ExpectAuthenticationRefused(FakePeer& peer) {
    absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
    ASSERT_TRUE(refusal.ok()) << refusal.status();
    EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
    EXPECT_THAT(refusal->reason, HasSubstr("authentication failed"));
  }
};

/// Small segments and eager messages; a pool of four buffers.
EmuConfig SmallConfig(uint32_t credits) {
  EmuConfig config = TestConfig();
  config.segment_bytes = 4096;
  config.eager_max_bytes = 4096;
  config.rx_pool_bytes = 4 * 4096;
  config.credits_per_peer = credits;
  return config;
}

TEST_F(EmuWireTest, ParkedHandshakeCompletesOnceConfiguredAndGranted) {
  FakePeer peer(device_->DataAddress(), comm_);
  peer.Authenticate(comm_.config.secret);  // the device only knows the secret so far
  std::future<absl::Status> configured = Configure();
  absl::StatusOr<ControlMessage> accept = peer.ReadControl();
  ASSERT_TRUE(accept.ok()) << accept.status();
  EXPECT_EQ(accept->kind, ControlKind::kAccept);
  ASSERT_NO_FATAL_FAILURE(peer.AcceptDevice(listener_));
  absl::StatusOr<SegmentHeader> grant = peer.ReadSegment();
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_EQ(grant->type, SegmentType::kCredit);
  EXPECT_EQ(grant->total, 8u);  // credits_per_peer
  EXPECT_EQ(device_->Stats().rx_pool_bytes_reserved, 8 * (64u << 10));
  // Up, but not ready until the peer's own grant (here: none) is known.
  EXPECT_EQ(configured.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  peer.Grant(0);
  EXPECT_TRUE(configured.get().ok());
  EXPECT_EQ(device_->Stats().sessions_up, 1u);
}

// Whoever holds the secret (every app of the communicator's tenant) passes the handshake:
// a session that waits for its communicator to be configured has the handshake's
// timeout, and then is refused with the reason.
TEST_F(EmuWireTest, ASessionWaitsForItsCommunicatorOnlyUntilTheHandshakeTimeout) {
  EmuConfig config = TestConfig();
  config.handshake_timeout = absl::Seconds(2);
  Start(config);
  FakePeer peer(device_->DataAddress(), comm_);
  peer.Authenticate(comm_.config.secret);
  absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_EQ(refusal->reason, absl::StrCat("communicator ", CommIdHex(comm_.config.id),
                                          " was not configured at engine ", device_->DataAddress(),
                                          " within the handshake timeout of 2s"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
}

// Sessions waiting for their communicator count among the accepted connections in their
// handshake: one more connection refuses the oldest of them, with the reason, and the
// newest is served.
TEST_F(EmuWireTest, SessionsWaitingForTheirCommunicatorAreBoundedWithTheHandshakes) {
  std::vector<std::unique_ptr<FakePeer>> waiting;
  for (size_t i = 0; i < poe::tcp::kMaxAcceptedHandshakes; ++i) {
    waiting.push_back(std::make_unique<FakePeer>(device_->DataAddress(), comm_));
    ASSERT_NO_FATAL_FAILURE(waiting.back()->Authenticate(comm_.config.secret));
  }
  FakePeer newest(device_->DataAddress(), comm_);
  absl::StatusOr<ControlMessage> refusal = waiting.front()->ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_EQ(refusal->reason,
            absl::StrCat("more than ", poe::tcp::kMaxAcceptedHandshakes,
                         " data sessions at engine ", device_->DataAddress(),
                         " were in their handshake or waiting for their communicator; the "
                         "oldest is closed"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
  newest.Authenticate(comm_.config.secret);  // answered with a challenge
}

// A join that failed and is retried at once removes and prepares the communicator again
// before the engine runs the removal: the newer preparation stands, so a peer's session
// waits for the configure instead of being refused as unknown.
TEST_F(EmuWireTest, APreparationRightAfterARemovalStands) {
  device_->RemoveCommunicator(comm_.config.id, absl::UnavailableError("join failed"));
  ASSERT_TRUE(device_->PrepareCommunicator(comm_.config.id, comm_.config.secret).ok());
  FakePeer peer(device_->DataAddress(), comm_);
  peer.Authenticate(comm_.config.secret);
  ASSERT_TRUE(peer.WaitUntilRead());  // so the session waits before the configure comes
  std::future<absl::Status> configured = Configure();
  absl::StatusOr<ControlMessage> accept = peer.ReadControl();
  ASSERT_TRUE(accept.ok()) << accept.status();
  EXPECT_EQ(accept->kind, ControlKind::kAccept) << accept->reason;
}

// A peer's session that waited for the communicator is closed, with the reason, when the
// communicator then fails to configure, not left until the communicator is removed.
TEST_F(EmuWireTest, AFailedConnectClosesThePeersSessionThatWaited) {
  comm_.config.ranks.push_back({.data_address = "nowhere"});  // rank 2: no port to connect to
  FakePeer peer(device_->DataAddress(), comm_);
  peer.Authenticate(comm_.config.secret);
  ASSERT_TRUE(peer.WaitUntilRead());  // so the session waits before the configure comes
  std::future<absl::Status> configured = Configure();
  ASSERT_EQ(configured.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const absl::Status status = configured.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("data address 'nowhere' is not host:port"));
  absl::StatusOr<ControlMessage> bye = peer.ReadControl();
  while (bye.ok() && bye->kind != ControlKind::kBye) bye = peer.ReadControl();
  ASSERT_TRUE(bye.ok()) << bye.status();
  EXPECT_THAT(bye->reason, HasSubstr("data address 'nowhere' is not host:port"));
  EXPECT_EQ(device_->Stats().wire_errors, 0u);  // closed as the communicator's, not refused
}

// Of what the peer sends, only its credit grant may come before the device's own session
// to it is up.
TEST_F(EmuWireTest, DataBeforeTheDevicesSessionIsUpFailsTheConfigure) {
  FakePeer peer(device_->DataAddress(), comm_);
  std::future<absl::Status> configured = Admit(peer);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, 16), Pattern(16, 1));
  ASSERT_EQ(configured.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const absl::Status status = configured.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(),
              HasSubstr("eager segment before this engine's data session to it is up"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
}

TEST_F(EmuWireTest, EagerMessagesWithinCreditsAreStagedAndTheirCreditsReturn) {
  Start(SmallConfig(2));
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  EXPECT_EQ(peer.credits(), 2u);
  const std::vector<std::byte> first = Pattern(4096, 1), second = Pattern(100, 2);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, first.size(), 0), first);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, second.size(), 1), second);
  RankBuffers a, b;
  auto received_a = PostRecv(a, first.size());
  auto received_b = PostRecv(b, second.size());
  EXPECT_TRUE(Wait(received_a).status.ok());
  EXPECT_TRUE(Wait(received_b).status.ok());
  EXPECT_EQ(a.slots[2], first);
  EXPECT_EQ(b.slots[2], second);
  while (peer.credits() < 4) ASSERT_TRUE(peer.ReadUntil(SegmentType::kCredit).ok());
  EXPECT_EQ(peer.credits(), 4u);  // both came back
  const DeviceStats stats = device_->Stats();
  EXPECT_EQ(stats.rx_pool_bytes_used, 0u);
  EXPECT_EQ(stats.rx_pool_bytes_reserved, 2 * 4096u);
  EXPECT_EQ(stats.bytes_received, first.size() + second.size());
}

TEST_F(EmuWireTest, RendezvousDataGoesStraightIntoTheReceiveWhicheverCameFirst) {
  Start(SmallConfig(2));
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  const std::vector<std::byte> early = Pattern(3 * 4096 + 5, 3), late = Pattern(9000, 4);
  // Request before the receive is posted: the clear-to-send waits for the receive.
  peer.SendSegment(peer.Message(SegmentType::kRequest, early.size(), 0));
  RankBuffers a, b;
  auto received_a = PostRecv(a, early.size());
  auto received_b = PostRecv(b, late.size());  // queued behind the first receive
  absl::StatusOr<SegmentHeader> clear = peer.ReadUntil(SegmentType::kClearToSend);
  ASSERT_TRUE(clear.ok()) << clear.status();
  EXPECT_EQ(clear->src, 0u);
  EXPECT_EQ(clear->dst, 1u);
  EXPECT_EQ(clear->sequence, 0u);
  EXPECT_EQ(clear->total, early.size());
  for (uint64_t offset = 0; offset < early.size(); offset += 4096) {
    const uint64_t end = std::min<uint64_t>(offset + 4096, early.size());
    peer.SendSegment(peer.Message(SegmentType::kRendezvousData, early.size(), 0, offset),
                     std::vector<std::byte>(early.begin() + offset, early.begin() + end));
  }
  EXPECT_TRUE(Wait(received_a).status.ok());
  EXPECT_EQ(a.slots[2], early);
  // Request after the receive is posted: cleared at once.
  peer.SendSegment(peer.Message(SegmentType::kRequest, late.size(), 1));
  clear = peer.ReadUntil(SegmentType::kClearToSend);
  ASSERT_TRUE(clear.ok()) << clear.status();
  EXPECT_EQ(clear->sequence, 1u);
  for (uint64_t offset = 0; offset < late.size(); offset += 4096) {
    const uint64_t end = std::min<uint64_t>(offset + 4096, late.size());
    peer.SendSegment(peer.Message(SegmentType::kRendezvousData, late.size(), 1, offset),
                     std::vector<std::byte>(late.begin() + offset, late.begin() + end));
  }
  EXPECT_TRUE(Wait(received_b).status.ok());
  EXPECT_EQ(b.slots[2], late);
  EXPECT_EQ(device_->Stats().rx_pool_bytes_used, 0u);  // never staged
  EXPECT_EQ(device_->Stats().wire_errors, 0u);
}

TEST_F(EmuWireTest, WhatAPeerSentBeforeItsByeIsReceived) {
  Start(SmallConfig(2));
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  const std::vector<std::byte> first = Pattern(4096, 5), second = Pattern(4000, 6);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, first.size(), 0), first);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, second.size(), 1), second);
  peer.Bye("tenant finished");
  peer.Hangup();
  RankBuffers a, b;
  auto received_a = PostRecv(a, first.size());
  auto received_b = PostRecv(b, second.size());
  Completion done = Wait(received_a);
  EXPECT_TRUE(done.status.ok()) << done.status;
  done = Wait(received_b);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_EQ(a.slots[2], first);
  EXPECT_EQ(b.slots[2], second);
  // Rank 0 has left; nothing more comes from it.
  RankBuffers more;
  auto next = PostRecv(more, 4);
  EXPECT_EQ(Wait(next).status,
            absl::UnavailableError(
                absl::StrCat("rank 0 on peer daemon ", fake_address_, " left: tenant finished")));
  const DeviceStats stats = device_->Stats();
  EXPECT_EQ(stats.rx_pool_bytes_used, 0u);
  EXPECT_EQ(stats.rx_pool_bytes_reserved, 0u);  // released with the link
  EXPECT_EQ(stats.wire_errors, 0u);
}

// A peer whose ranks ran their part and left (BYE) while the device still waited for
// another peer's sessions: they depart as from a ready communicator, what they sent stays,
// and the communicator gets ready once the other peer is up (the device broke it: "lost
// peer daemon ...: peer daemon closed the session: ...", and its rank never joined).
TEST_F(EmuWireTest, APeerThatLeftBeforeTheCommunicatorWasReadyDeparts) {
  Start(SmallConfig(2));
  // Rank 0 at the fake, rank 1 on the device, rank 2 at a second fake that comes later.
  std::string later_address;
  const int later_listener = cclo::testing::ListenLoopback(&later_address);
  ASSERT_GE(later_listener, 0) << std::strerror(errno);
  comm_ = MakeComm({device_, device_, device_}, 32);
  comm_.config.ranks[0].data_address = fake_address_;
  comm_.config.ranks[2].data_address = later_address;
  ASSERT_TRUE(device_->PrepareCommunicator(comm_.config.id, comm_.config.secret).ok());
  TestComm as_later = comm_;  // the fake announces the address of its comm's rank 0
  as_later.config.ranks[0].data_address = later_address;

  FakePeer peer(device_->DataAddress(), comm_);
  std::future<absl::Status> configured = Admit(peer);
  peer.Grant(2);
  ASSERT_NO_FATAL_FAILURE(peer.AcceptDevice(listener_));
  ASSERT_TRUE(peer.ReadSegment().ok());  // the device's grant: this link is up
  const std::vector<std::byte> data = Pattern(4000, 9);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, data.size(), 0), data);
  peer.Bye("rank 0 destroyed the communicator");
  ASSERT_TRUE(peer.WaitUntilRead());
  peer.Hangup();

  FakePeer later(device_->DataAddress(), as_later);
  later.Authenticate(comm_.config.secret);
  absl::StatusOr<ControlMessage> accept = later.ReadControl();
  ASSERT_TRUE(accept.ok()) << accept.status();
  EXPECT_EQ(accept->kind, ControlKind::kAccept);
  later.Grant(2);
  ASSERT_NO_FATAL_FAILURE(later.AcceptDevice(later_listener));
  ASSERT_EQ(configured.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_TRUE(configured.get().ok());

  RankBuffers buffers;
  auto received = PostRecv(buffers, data.size());
  Completion done = Wait(received);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_EQ(buffers.slots[2], data);
  RankBuffers more;
  auto next = PostRecv(more, 4);
  EXPECT_EQ(Wait(next).status,
            absl::UnavailableError(absl::StrCat("rank 0 on peer daemon ", fake_address_,
                                                " left: rank 0 destroyed the communicator")));
  EXPECT_EQ(device_->Stats().sessions_left, 1u);
  EXPECT_EQ(device_->Stats().sessions_up, 1u);
  close(later_listener);
}

// A peer that broke the communicator (it lost a third daemon, whose sessions it waited
// for) while the device still waited for that third daemon too: the join fails naming the
// peer as the one that broke it, with its reason, not as a lost peer daemon, which would
// send the operator to a host that is fine.
TEST_F(EmuWireTest, APeerThatBrokeTheCommunicatorBeforeItWasReadyIsNamedAsSuch) {
  Start(SmallConfig(2));
  // Rank 0 at the fake, rank 1 on the device, rank 2 at an address nobody answers on.
  std::string silent_address;
  const int silent_listener = cclo::testing::ListenLoopback(&silent_address);
  ASSERT_GE(silent_listener, 0) << std::strerror(errno);
  comm_ = MakeComm({device_, device_, device_}, 33);
  comm_.config.ranks[0].data_address = fake_address_;
  comm_.config.ranks[2].data_address = silent_address;
  ASSERT_TRUE(device_->PrepareCommunicator(comm_.config.id, comm_.config.secret).ok());

  FakePeer peer(device_->DataAddress(), comm_);
  std::future<absl::Status> configured = Admit(peer);
  peer.Grant(2);
  ASSERT_NO_FATAL_FAILURE(peer.AcceptDevice(listener_));
  ASSERT_TRUE(peer.ReadSegment().ok());  // the device's grant: this link is up
  const std::string reason = absl::StrCat("data session to peer daemon ", silent_address,
                                          " (rank 2) failed: handshake did not finish in time");
  peer.Bye(reason, poe::ByeKind::kBroke);
  ASSERT_TRUE(peer.WaitUntilRead());
  peer.Hangup();
  ASSERT_EQ(configured.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(configured.get(),
            absl::UnavailableError(
                absl::StrCat("peer daemon ", fake_address_, " broke the communicator: ", reason)));
  close(silent_listener);
}

// The peer's BYE on the session the device sends on may be read before the data the peer
// sent on its own: the ranks depart only when that one ends, so nothing is lost.
TEST_F(EmuWireTest, WhatAPeerSendsAfterItsByeOnTheDevicesSessionIsReceived) {
  Start(SmallConfig(2));
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer, 1);
  const std::vector<std::byte> bye =
      poe::EncodeControl({.kind = ControlKind::kBye, .reason = "tenant finished"});
  peer.SendBack({.type = SegmentType::kControl, .comm = comm_.config.id, .total = bye.size()}, bye);
  char byte;
  EXPECT_FALSE(peer.Read(&byte, 1));  // the device closed its session: it read the BYE
  // Sent now, a message to the leaving rank goes nowhere and fails once that rank left.
  RankBuffers out;
  out.slots[0] = Pattern(16, 7);
  CallDescriptor send = Describe(comm_, Collective::kSend, 1, 16, DataType::kUint8);
  send.peer = 0;
  send.tag = 1;
  auto sent = Submit(*device_, send, out.Views());
  const std::vector<std::byte> data = Pattern(4000, 8);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, data.size(), 0), data);
  peer.SendControl({.kind = ControlKind::kBye, .reason = "tenant finished"});
  RankBuffers in;
  auto received = PostRecv(in, data.size());
  Completion done = Wait(received);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_EQ(in.slots[2], data);
  const absl::Status left = absl::UnavailableError(
      absl::StrCat("rank 0 on peer daemon ", fake_address_, " left: tenant finished"));
  EXPECT_EQ(Wait(sent).status, left);
  RankBuffers more;
  auto next = PostRecv(more, 4);
  EXPECT_EQ(Wait(next).status, left);
  EXPECT_EQ(device_->Stats().sessions_left, 1u);
  EXPECT_EQ(device_->Stats().wire_errors, 0u);
}

// A peer whose end of the device's session is gone first (it died, or that connection
// broke) may still have data on its own: the device reads it to the end, and reports the
// loss, not the goodbye the peer then says on its own session.
TEST_F(EmuWireTest, WhatAPeerSentIsReceivedWhenTheDevicesSessionIsLostFirst) {
  Start(SmallConfig(2));
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer, 1);
  peer.HangupBack();
  const std::vector<std::byte> data = Pattern(4000, 9);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, data.size(), 0), data);
  peer.SendControl({.kind = ControlKind::kBye, .reason = "lost my other data session"});
  peer.Hangup();
  RankBuffers in;
  auto received = PostRecv(in, data.size());
  Completion done = Wait(received);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_EQ(in.slots[2], data);
  RankBuffers more;
  auto next = PostRecv(more, 4);
  const absl::Status lost = Wait(next).status;
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(lost.message(),
              HasSubstr(absl::StrCat("lost peer daemon ", fake_address_, " (rank 0)")));
  EXPECT_EQ(device_->Stats().sessions_lost, 1u);
  EXPECT_EQ(device_->Stats().wire_errors, 0u);
}

// A peer that ends the session the device sends on but keeps its own open has the
// handshake timeout to end that one too; then the device closes it, saying why, and the
// peer's rank counts as lost.
TEST_F(EmuWireTest, APeerThatKeepsItsOwnSessionOpenAfterTheDevicesEndsIsLostAfterATimeout) {
  EmuConfig config = TestConfig();
  config.handshake_timeout = absl::Seconds(1);
  Start(config);
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  RankBuffers in;
  auto received = PostRecv(in, 16);
  peer.HangupBack();
  const std::string why = "the peer's data session was still open 1s after this engine's";
  Completion lost = Wait(received);
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(lost.status.message(),
              HasSubstr(absl::StrCat("lost peer daemon ", fake_address_, " (rank 0)")));
  EXPECT_THAT(lost.status.message(), HasSubstr(why));
  absl::StatusOr<ControlMessage> bye = peer.ReadControl();  // on the fake's own session
  ASSERT_TRUE(bye.ok()) << bye.status();
  EXPECT_EQ(bye->kind, ControlKind::kBye);
  EXPECT_THAT(bye->reason, HasSubstr(why));
  EXPECT_EQ(device_->Stats().sessions_lost, 1u);
  EXPECT_EQ(device_->Stats().wire_errors, 0u);
}

// Invalid data is reported as such even after the peer's end of the device's session is
// gone: only the peer's goodbye gives way to that loss.
TEST_F(EmuWireTest, InvalidDataAfterTheDevicesSessionIsLostBreaksTheCommunicator) {
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  ASSERT_TRUE(peer.EndBack());
  ExpectGarbageBreaks(peer);
}

TEST_F(EmuWireTest, PeerVanishingMidMessageFailsTheReceiveAsLost) {
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  peer.SendSegment(peer.Message(SegmentType::kEagerData, 64, 0),
                   std::vector<std::byte>(64, std::byte{1}));
  peer.SendSegment(peer.Message(SegmentType::kRequest, 64 << 10, 1));
  RankBuffers whole, half;
  auto first = PostRecv(whole, 64);
  EXPECT_TRUE(Wait(first).status.ok());
  EXPECT_EQ(whole.slots[2], std::vector<std::byte>(64, std::byte{1}));
  auto second = PostRecv(half, 64 << 10);
  ASSERT_TRUE(peer.ReadUntil(SegmentType::kClearToSend).ok());
  peer.SendSegment(peer.Message(SegmentType::kRendezvousData, 64 << 10, 1),
                   std::vector<std::byte>(32 << 10, std::byte{2}));  // half of it
  peer.Hangup();
  Completion lost = Wait(second);
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(lost.status.message(),
              HasSubstr(absl::StrCat("lost peer daemon ", fake_address_, " (rank 0)")));
  EXPECT_THAT(lost.status.message(), HasSubstr("connection closed by peer"));
  EXPECT_EQ(device_->Stats().rx_pool_bytes_used, 0u);
}

TEST_F(EmuWireTest, SegmentFromARankThePeerDoesNotHostBreaksTheCommunicator) {
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  RankBuffers buffers;
  auto pending = PostRecv(buffers, 16);
  SegmentHeader forged = peer.Message(SegmentType::kEagerData, 16);
  forged.src = 1;  // the device's own rank
  peer.SendSegment(forged, std::vector<std::byte>(16));
  Completion failed = Wait(pending);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status.message(), HasSubstr(absl::StrCat("invalid data from peer daemon ",
                                                              fake_address_, " (rank 0)")));
  EXPECT_THAT(failed.status.message(), HasSubstr("eager segment from rank 1"));
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
  auto pending = PostRecv(buffers, 16);
  // Sent after the receive may or may not be posted; either way it must not fit.
  peer.SendSegment(peer.Message(SegmentType::kEagerData, 64), std::vector<std::byte>(64));
  Completion failed = Wait(pending);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status.message(), HasSubstr("posted receive expects 16"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
}

TEST_F(EmuWireTest, GarbageHeaderBreaksTheCommunicator) {
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  ExpectGarbageBreaks(peer);
  // The device's own session says why the communicator broke, then closes.
  absl::StatusOr<ControlMessage> bye = peer.ReadControl();
  ASSERT_TRUE(bye.ok()) << bye.status();
  EXPECT_EQ(bye->kind, ControlKind::kBye);
  EXPECT_THAT(bye->reason, HasSubstr("invalid data from peer daemon"));
}

// Broken with no call to fail, the communicator is still reported: the event handler hears
// of the break and why.
TEST_F(EmuWireTest, GarbageOnAnIdleCommunicatorIsReportedAsABreak) {
  // Shared with the handler, which the engine may call after the test body (at teardown).
  auto heard = std::make_shared<std::promise<CommunicatorEvent>>();
  std::future<CommunicatorEvent> event = heard->get_future();
  device_->SetEventHandler([heard, once = true](const CommunicatorEvent& event) mutable {
    if (std::exchange(once, false)) heard->set_value(event);
  });
  FakePeer peer(device_->DataAddress(), comm_);
  Connect(peer);
  const std::vector<uint8_t> garbage(poe::kHeaderBytes, 0xFF);
  peer.Write(garbage.data(), garbage.size());
  ASSERT_EQ(event.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const CommunicatorEvent broken = event.get();
  EXPECT_EQ(broken.comm, comm_.config.id);
  EXPECT_TRUE(broken.departed.empty());
  EXPECT_EQ(broken.reason.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(broken.reason.message(), HasSubstr("invalid data from peer daemon"));
}

// A daemon of an older version (6: before call signatures carried the algorithm; 5: before
// departures of one rank were told and breaks said; 4: before call signatures; 2: one
// session carrying both ways) gets the refusal in its own version, naming both, so that
// it can say why.
TEST_F(EmuWireTest, PeerOfAnotherWireVersionIsRefusedInItsVersion) {
  for (const uint8_t version : {6, 5, 4, 2}) {
    FakePeer peer(device_->DataAddress(), comm_);
    SegmentHeader hello{.type = SegmentType::kControl, .comm = comm_.config.id};
    const std::vector<std::byte> payload = poe::EncodeControl({.kind = ControlKind::kHello,
                                                               .segment_bytes = 4096,
                                                               .timeout_ms = 10'000,
                                                               .connector = kFakeAddress,
                                                               .acceptor = device_->DataAddress()});
    hello.length = hello.total = payload.size();
    const poe::EncodedHeader bytes = poe::Encode(hello, version);
    peer.Write(bytes.data(), bytes.size());
    peer.Write(payload.data(), payload.size());
    poe::EncodedHeader answer;
    ASSERT_TRUE(peer.Read(answer.data(), answer.size()));
    EXPECT_EQ(answer[4], std::byte{version});
    const std::optional<poe::ForeignHeader> refusal =
        poe::DecodeForeign(answer.data(), answer.size());
    ASSERT_TRUE(refusal.has_value());
    EXPECT_EQ(refusal->header.comm, comm_.config.id);
    std::vector<std::byte> reason(refusal->header.length);
    ASSERT_TRUE(peer.Read(reason.data(), reason.size()));
    absl::StatusOr<ControlMessage> message = poe::DecodeControl(reason.data(), reason.size());
    ASSERT_TRUE(message.ok()) << message.status();
    EXPECT_EQ(message->kind, ControlKind::kRefuse);
    EXPECT_EQ(message->reason,
              absl::StrCat("the HELLO came in data wire version ", version, " and daemon ",
                           device_->DataAddress(),
                           " speaks version 7: all daemons of a communicator must speak one "
                           "data wire version"));
    char byte;
    EXPECT_FALSE(peer.Read(&byte, 1));  // then the device hangs up
  }
  EXPECT_EQ(device_->Stats().wire_errors, 4u);
}

TEST_F(EmuWireTest, WrongProofIsRefusedByTheAcceptor) {
  FakePeer peer(device_->DataAddress(), comm_);
  CommSecret wrong = comm_.config.secret;
  wrong[5] ^= 0x40;
  peer.Authenticate(wrong);
  ExpectAuthenticationRefused(peer);
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
  EXPECT_EQ(device_->Stats().sessions_up, 0u);
}

// A man in the middle lowering the connector's announced timeout (or any other field of
// its HELLO) leaves the connector's proof covering what it sent: the acceptor refuses.
TEST_F(EmuWireTest, HelloChangedOnTheWayIsRefusedByTheAcceptor) {
  FakePeer peer(device_->DataAddress(), comm_);
  const ControlMessage sent{.kind = ControlKind::kHello,
                            .nonce = {3},
                            .segment_bytes = 64 << 10,
                            .timeout_ms = 60'000,
                            .connector = peer.address(),
                            .acceptor = device_->DataAddress()};
  ControlMessage received = sent;
  received.timeout_ms = poe::kMinPeerTimeoutMs;
  peer.SendControl(received);
  absl::StatusOr<ControlMessage> challenge = peer.ReadControl();
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  ASSERT_EQ(challenge->kind, ControlKind::kChallenge);
  ControlMessage unproved = *challenge;
  unproved.mac = {};
  const CommSecret& secret = comm_.config.secret;
  // The acceptor's proof covers the HELLO it received, not the one the connector sent.
  EXPECT_TRUE(
      poe::MacEqual(challenge->mac, poe::HandshakeMac(secret, poe::HandshakeRole::kAcceptor,
                                                      comm_.config.id, received, unproved)));
  EXPECT_FALSE(poe::MacEqual(
      challenge->mac,
      poe::HandshakeMac(secret, poe::HandshakeRole::kAcceptor, comm_.config.id, sent, unproved)));
  peer.SendControl({.kind = ControlKind::kResponse,
                    .mac = poe::HandshakeMac(secret, poe::HandshakeRole::kConnector,
                                             comm_.config.id, sent, unproved)});
  ExpectAuthenticationRefused(peer);
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
  EXPECT_EQ(device_->Stats().sessions_up, 0u);
}

// The same for the acceptor's CHALLENGE, seen by the device as the connector: a changed
// segment size fails the acceptor's proof and the configure fails with why.
TEST_F(EmuWireTest, ChallengeChangedOnTheWayIsRefusedByTheConnector) {
  FakePeer peer(device_->DataAddress(), comm_);
  std::future<absl::Status> configured = Admit(peer);
  ASSERT_NO_FATAL_FAILURE(peer.AnswerHello(listener_, 128 << 10));
  ExpectAuthenticationRefused(peer);
  ASSERT_EQ(configured.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const absl::Status status = configured.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
  EXPECT_THAT(status.message(), HasSubstr("does not prove the secret"));
}

TEST_F(EmuWireTest, HelloForAnUnknownCommunicatorIsRefused) {
  TestComm other = comm_;
  other.config.id[0] ^= 1;
  FakePeer peer(device_->DataAddress(), other);
  peer.SendControl({.kind = ControlKind::kHello,
                    .segment_bytes = 4096,
                    .timeout_ms = 10'000,
                    .connector = kFakeAddress,
                    .acceptor = device_->DataAddress()});
  absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_THAT(refusal->reason, HasSubstr("unknown communicator"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
}

TEST_F(EmuWireTest, HelloTextIsEscapedInTheRefusalAndTheLog) {
  auto log = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
  devices_.clear();  // no engine logs while the sinks change
  spdlog::default_logger()->sinks().push_back(log);
  Start(TestConfig());
  FakePeer peer(device_->DataAddress(), comm_);
  peer.SendControl({.kind = ControlKind::kHello,
                    .segment_bytes = 4096,
                    .timeout_ms = 10'000,
                    .connector = "10.0.0.9:1\n[warning] forged line",
                    .acceptor = "elsewhere\n\x1b[2J"});
  absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
  devices_.clear();  // what the refusal logs is logged by now
  spdlog::default_logger()->sinks().pop_back();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_THAT(refusal->reason, HasSubstr("hello addressed to elsewhere\\n\\x1b[2J reached engine"));
  EXPECT_EQ(refusal->reason.find('\n'), std::string::npos) << refusal->reason;
  std::vector<std::string> lines;
  for (const spdlog::details::log_msg_buffer& line : log->last_raw()) {
    lines.emplace_back(line.payload.data(), line.payload.size());
  }
  EXPECT_THAT(lines, Contains(HasSubstr("data session with 10.0.0.9:1\\n[warning] forged line "
                                        "closed: hello addressed to")));
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  }
}

TEST_F(EmuWireTest, HelloWithAnEagerSizeAboveItsSegmentIsRefused) {
  FakePeer peer(device_->DataAddress(), comm_);
  peer.SendControl({.kind = ControlKind::kHello,
                    .segment_bytes = 4096,
                    .eager_bytes = 8192,
                    .timeout_ms = 10'000,
                    .connector = kFakeAddress,
                    .acceptor = device_->DataAddress()});
  absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_EQ(refusal->reason, "peer eager size 8192 exceeds its segment size 4096");
}

TEST_F(EmuWireTest, HelloWithoutAPeerTimeoutIsRefused) {
  FakePeer peer(device_->DataAddress(), comm_);
  peer.SendControl({.kind = ControlKind::kHello,
                    .segment_bytes = 4096,
                    .connector = kFakeAddress,
                    .acceptor = device_->DataAddress()});
  absl::StatusOr<ControlMessage> refusal = peer.ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, ControlKind::kRefuse);
  EXPECT_EQ(refusal->reason, "peer timeout 0 ms is not in [1000, 86400000]");
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
