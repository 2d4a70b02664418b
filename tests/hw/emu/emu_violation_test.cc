// EmuDevice against a peer that breaks the eager/rendezvous protocol: rendezvous data
// nobody cleared, more rendezvous requests waiting than the device takes, eager messages
// beyond the credits granted, a clear-to-send for a message the device is not sending, a
// credit grant beyond the limit, data on the session the device sends on, the departure of
// a rank the peer does not host or that already left. Each breaks only
// the communicator it came on, with a wire error; another communicator of the same device,
// with a real peer device, keeps working.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/poe/wire.h"
#include "tests/hw/emu/device_harness.h"
#include "tests/hw/emu/fake_peer.h"

namespace cclo::hw::emu::testing {
namespace {

/// Rendezvous requests the device lets a peer link have waiting for their receives.
constexpr uint64_t kWaiting = 5;

using poe::ControlKind;
using poe::SegmentHeader;
using poe::SegmentType;
using ::testing::HasSubstr;

class EmuViolationTest : public FakePeerTest {
 protected:
  void SetUp() override {
    EmuConfig config = TestConfig();
    config.credits_per_peer = 1;
    config.rendezvous_waiting_per_peer = kWaiting;
    Start(config);
    peer_.emplace(device_->DataAddress(), comm_);
    ASSERT_NO_FATAL_FAILURE(Connect(*peer_));
    // A second communicator between the device and another one.
    others_ = MakeDevices(1, config);
    ASSERT_EQ(others_.size(), 1u);
    healthy_ = MakeComm({device_, others_[0].get()}, 77);
    ASSERT_TRUE(ConfigureAll(healthy_).ok());
  }

  /// Sends `segment` (with `payload`; on the device's own session when `back`) while rank 1
  /// waits for a message from the fake; expects that receive to fail with invalid data
  /// naming `problem`, the fake to hear BYE, one wire error, and the healthy communicator
  /// to go on.
  void ExpectBreaks(SegmentHeader segment, const std::vector<std::byte>& payload,
                    const std::string& problem, bool back = false) {
    RankBuffers buffers;
    auto pending = PostRecv(buffers, 1 << 20);
    if (back) {
      peer_->SendBack(segment, payload);
    } else {
      peer_->SendSegment(segment, payload);
    }
    Completion failed = Wait(pending);
    EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(failed.status.message(), HasSubstr(absl::StrCat("invalid data from peer daemon ",
                                                                fake_address_, " (rank 0)")));
    EXPECT_THAT(failed.status.message(), HasSubstr(problem));
    absl::StatusOr<poe::ControlMessage> bye = peer_->ReadControl();  // says why, then closes
    ASSERT_TRUE(bye.ok()) << bye.status();
    EXPECT_EQ(bye->kind, ControlKind::kBye);
    EXPECT_EQ(bye->bye, poe::ByeKind::kBroke);
    EXPECT_THAT(bye->reason, HasSubstr("invalid data from peer daemon"));  // cut to 256 bytes
    EXPECT_EQ(device_->Stats().wire_errors, 1u);
    ExpectHealthyWorks();
  }

  /// A 300000-byte send and an eager 1000-byte send over the healthy communicator.
  void ExpectHealthyWorks() {
    for (uint64_t bytes : {300000, 1000}) {
      RankBuffers from, to;
      from.slots[0] = Pattern(bytes, 9);
      to.slots[2].resize(bytes);
      CallDescriptor send = Describe(healthy_, Collective::kSend, 0, bytes, DataType::kUint8);
      send.peer = 1;
      CallDescriptor recv = Describe(healthy_, Collective::kRecv, 1, bytes, DataType::kUint8);
      recv.peer = 0;
      auto sent = Submit(*device_, send, from.Views());
      auto received = Submit(*others_[0], recv, to.Views());
      EXPECT_TRUE(Wait(sent).status.ok());
      EXPECT_TRUE(Wait(received).status.ok());
      EXPECT_TRUE(to.slots[2] == from.slots[0]) << bytes << " bytes";
    }
  }

  std::optional<FakePeer> peer_;
  std::vector<DevicePtr> others_;
  TestComm healthy_;
};

/// A control segment carrying DEPART of `rank`.
SegmentHeader Departure(const TestComm& comm, uint32_t rank, std::vector<std::byte>* payload) {
  *payload = poe::EncodeControl({.kind = ControlKind::kDepart, .reason = "done", .rank = rank});
  return {.type = SegmentType::kControl, .comm = comm.config.id, .total = payload->size()};
}

TEST_F(EmuViolationTest, DepartureOfTheDevicesOwnRank) {
  std::vector<std::byte> payload;
  const SegmentHeader depart = Departure(comm_, 1, &payload);
  ExpectBreaks(depart, payload, "depart message for rank 1, which that peer does not host");
}

TEST_F(EmuViolationTest, DepartureOfARankOutsideTheCommunicator) {
  std::vector<std::byte> payload;
  const SegmentHeader depart = Departure(comm_, 7, &payload);
  ExpectBreaks(depart, payload, "depart message for rank 7, which that peer does not host");
}

TEST_F(EmuViolationTest, DepartureOnTheSessionTheDeviceSendsOn) {
  std::vector<std::byte> payload;
  const SegmentHeader depart = Departure(comm_, 0, &payload);
  ExpectBreaks(depart, payload, "depart message on the data session this engine sends on", true);
}

// Its first departure is taken (no call waits here to fail with it); its second is not.
TEST_F(EmuViolationTest, SecondDepartureOfARank) {
  std::vector<std::byte> payload;
  const SegmentHeader depart = Departure(comm_, 0, &payload);
  peer_->SendSegment(depart, payload);
  peer_->SendSegment(depart, payload);
  absl::StatusOr<poe::ControlMessage> bye = peer_->ReadControl();
  ASSERT_TRUE(bye.ok()) << bye.status();
  EXPECT_EQ(bye->kind, ControlKind::kBye);
  EXPECT_EQ(bye->bye, poe::ByeKind::kBroke);
  EXPECT_THAT(bye->reason, HasSubstr("depart message for rank 0, which already left"));
  EXPECT_EQ(device_->Stats().wire_errors, 1u);
  ExpectHealthyWorks();
}

TEST_F(EmuViolationTest, RendezvousDataWithoutClearToSend) {
  ExpectBreaks(peer_->Message(SegmentType::kRendezvousData, 1 << 20), std::vector<std::byte>(4096),
               "rendezvous data without a clear-to-send");
}

TEST_F(EmuViolationTest, RendezvousDataAfterARequestButBeforeTheClearToSend) {
  peer_->SendSegment(peer_->Message(SegmentType::kRequest, 4096, 5));
  // Sequence 5 of the fake's messages: nobody posted a receive for it, so no CTS went.
  ExpectBreaks(peer_->Message(SegmentType::kRendezvousData, 4096, 5), std::vector<std::byte>(4096),
               "rendezvous data without a clear-to-send");
}

TEST_F(EmuViolationTest, RendezvousRequestsBeyondTheLimitWaiting) {
  // As many requests as the limit may wait for their receives, not one more. (Sequence 0
  // is the receive ExpectBreaks posts.)
  for (uint64_t sequence = 1; sequence <= kWaiting; ++sequence) {
    peer_->SendSegment(peer_->Message(SegmentType::kRequest, 4096, sequence));
  }
  ExpectBreaks(peer_->Message(SegmentType::kRequest, 4096, kWaiting + 1), {},
               "rendezvous request beyond the 5 its sender may have waiting for their "
               "receives (rendezvous_waiting_per_peer)");
}

TEST_F(EmuViolationTest, EagerBeyondTheCredits) {
  // One credit: the first eager message is fine (staged), the second is one too many.
  peer_->SendSegment(peer_->Message(SegmentType::kEagerData, 64, 3), std::vector<std::byte>(64));
  ExpectBreaks(peer_->Message(SegmentType::kEagerData, 64, 4), std::vector<std::byte>(64),
               "eager message beyond the 1 credits granted to its sender");
}

TEST_F(EmuViolationTest, EagerLargerThanTheDeviceTakes) {
  const uint64_t bytes = (64 << 10) + 8;  // fits a segment, not the eager limit
  ExpectBreaks(peer_->Message(SegmentType::kEagerData, bytes, 1), std::vector<std::byte>(bytes),
               "eager message of 65544 bytes exceeds the eager limit of 65536");
}

TEST_F(EmuViolationTest, ClearToSendForAMessageTheDeviceIsNotSending) {
  SegmentHeader clear = peer_->Message(SegmentType::kClearToSend, 4096);
  clear.src = 1;  // the device's rank ...
  clear.dst = 0;  // ... sending to the fake's
  ExpectBreaks(clear, {},
               "clear-to-send for the message from rank 1 to rank 0 (tag 1, sequence 0), which "
               "this engine is not sending");
}

TEST_F(EmuViolationTest, ClearToSendInTheWrongDirection) {
  // Names the fake's rank as the sender: a clear-to-send travels the other way.
  ExpectBreaks(peer_->Message(SegmentType::kClearToSend, 4096), {},
               "clear-to-send segment from rank 1, which that peer does not host");
}

TEST_F(EmuViolationTest, DataOnTheSessionTheDeviceSendsOn) {
  ExpectBreaks(peer_->Message(SegmentType::kEagerData, 64), std::vector<std::byte>(64),
               "eager segment on the data session this engine sends on", true);
}

// A message's call names its algorithm by its place in the collective's table: a place
// past the table's end, or none (0) for a collective that has one, is no call's, refused as
// it arrives rather than staged until a receive compares it.
TEST_F(EmuViolationTest, AMessageOfAnAlgorithmItsCollectiveDoesNotHave) {
  SegmentHeader eager = peer_->Message(SegmentType::kEagerData, 64, 3);  // no receive yet
  eager.tag = kCollectiveTag;
  eager.call = {
      .collective = Collective::kAllreduce, .datatype = DataType::kFloat32, .algorithm = 200};
  ExpectBreaks(eager, std::vector<std::byte>(64),
               "eager segment of allreduce of float32 (sum) names algorithm 200, not one of "
               "allreduce's 3 (places 1 to 3)");
}

TEST_F(EmuViolationTest, ARequestNamingNoAlgorithmForACollectiveThatHasThem) {
  SegmentHeader request = peer_->Message(SegmentType::kRequest, 4096, 3);
  request.tag = kCollectiveTag;
  request.call = {.collective = Collective::kBcast, .datatype = DataType::kInt32};
  ExpectBreaks(request, {},
               "rendezvous request segment of bcast of int32 from root 0 names algorithm 0, not "
               "one of bcast's 3 (places 1 to 3)");
}

// Nor is a rooted collective's message whose root is outside the communicator, or a
// collective's on a point-to-point tag, or a point-to-point message on the collectives'.
TEST_F(EmuViolationTest, AMessageOfARootOutsideTheCommunicator) {
  SegmentHeader eager = peer_->Message(SegmentType::kEagerData, 64, 3);
  eager.tag = kCollectiveTag;
  eager.call = {
      .collective = Collective::kBcast, .datatype = DataType::kInt8, .algorithm = 1, .root = 2};
  ExpectBreaks(eager, std::vector<std::byte>(64),
               "eager segment of bcast of int8 from root 2: root 2 is outside the communicator "
               "of 2 ranks");
}

TEST_F(EmuViolationTest, ACollectivesMessageOnAPointToPointTag) {
  SegmentHeader request = peer_->Message(SegmentType::kRequest, 4096, 3);  // tag 1
  request.call = {.collective = Collective::kBarrier, .algorithm = 1};
  ExpectBreaks(request, {},
               "rendezvous request segment of barrier carries tag 1; collectives' messages "
               "carry 4294967295");
}

TEST_F(EmuViolationTest, APointToPointMessageOnTheCollectivesTag) {
  SegmentHeader eager = peer_->Message(SegmentType::kEagerData, 64, 3);  // a send's call
  eager.tag = kCollectiveTag;
  ExpectBreaks(eager, std::vector<std::byte>(64),
               "eager segment of send/recv carries tag 4294967295, which only collectives' "
               "messages carry");
}

// A handshake message once the session is open says so, not that the handshake goes on.
TEST_F(EmuViolationTest, AHandshakeMessageOnAnOpenSession) {
  const std::vector<std::byte> payload = poe::EncodeControl({.kind = ControlKind::kAccept});
  ExpectBreaks({.type = SegmentType::kControl, .comm = comm_.config.id, .total = payload.size()},
               payload, "unexpected accept message on an open session");
}

TEST_F(EmuViolationTest, CreditsBeyondTheLimit) {
  peer_->Grant(poe::kMaxCredits);
  ExpectBreaks({.type = SegmentType::kCredit, .comm = comm_.config.id, .total = 1}, {},
               "credit segment raises the eager credits held to 65537, above 65536");
}

}  // namespace
}  // namespace cclo::hw::emu::testing
