// Sends and receives of one rank run side by side, as MPI's nonblocking ones do: two ranks
// that each post a receive before their send meet (eager and rendezvous alike), sends of
// one tag still meet receives in submission order whatever protocol each takes, a
// collective still waits for the point-to-point calls ahead of it, a send of what a
// receive ahead of it fills waits for it, and every receive under way fails when its
// sender leaves.
#include <chrono>
#include <future>
#include <vector>

#include "gtest/gtest.h"
#include "tests/hw/emu/device_harness.h"
#include "tests/hw/emu/fake_peer.h"

namespace cclo::hw::emu::testing {
namespace {

constexpr uint64_t kSmall = 16;        // floats: eager
constexpr uint64_t kLarge = 64 << 10;  // floats (256 KiB): rendezvous in 64 KiB segments
/// Bound on a call that should finish at once; before sends and receives overlapped,
/// ReceiveFirstOnBothRanks waited this long and failed.
constexpr absl::Duration kDeadline = absl::Seconds(10);

class PointToPointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = MakeDevices(2);
    ASSERT_EQ(devices_.size(), 2u);
    comm_ = MakeComm({devices_[0].get(), devices_[1].get()}, 71);
    ASSERT_TRUE(ConfigureAll(comm_).ok());
  }

  /// `rank` posts a receive of `count` floats from the other rank into `into`.
  std::future<Completion> Receive(uint32_t rank, uint64_t count, RankBuffers& into) {
    CallDescriptor recv = Describe(comm_, Collective::kRecv, rank, count);
    recv.peer = 1 - rank;
    into.slots[2].assign(count * sizeof(float), std::byte{0});
    return Submit(*comm_.host[rank], recv, into.Views(), kDeadline);
  }

  /// `rank` sends `data` to the other rank.
  std::future<Completion> Send(uint32_t rank, const std::vector<std::byte>& data,
                               RankBuffers& from) {
    CallDescriptor send = Describe(comm_, Collective::kSend, rank, data.size() / sizeof(float));
    send.peer = 1 - rank;
    from.slots[0] = data;
    return Submit(*comm_.host[rank], send, from.Views(), kDeadline);
  }

  /// Both ranks post a receive, then a send, of `count` floats; each gets the other's.
  void ExchangeReceivingFirst(uint64_t count) {
    RankBuffers received[2], sent[2];
    std::future<Completion> receives[2], sends[2];
    for (uint32_t rank = 0; rank < 2; ++rank) receives[rank] = Receive(rank, count, received[rank]);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      sends[rank] = Send(rank, Pattern(count * sizeof(float), rank + 1), sent[rank]);
    }
    for (uint32_t rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(Wait(sends[rank]).status.ok()) << "send of rank " << rank;
      EXPECT_TRUE(Wait(receives[rank]).status.ok()) << "receive of rank " << rank;
      EXPECT_TRUE(received[rank].slots[2] == Pattern(count * sizeof(float), 2 - rank))
          << "rank " << rank;
    }
  }

  /// Rank 0 sends `count` floats to itself and receives them, the receive posted first
  /// or the send.
  void SendToItself(uint64_t count, bool receive_first) {
    RankBuffers received, sent;
    CallDescriptor recv = Describe(comm_, Collective::kRecv, 0, count);
    recv.peer = 0;
    received.slots[2].assign(count * sizeof(float), std::byte{0});
    CallDescriptor send = Describe(comm_, Collective::kSend, 0, count);
    send.peer = 0;
    sent.slots[0] = Pattern(count * sizeof(float), 3);
    std::future<Completion> receive, sending;
    if (receive_first) receive = Submit(*comm_.host[0], recv, received.Views(), kDeadline);
    sending = Submit(*comm_.host[0], send, sent.Views(), kDeadline);
    if (!receive_first) receive = Submit(*comm_.host[0], recv, received.Views(), kDeadline);
    const Completion sent_done = Wait(sending);
    const Completion received_done = Wait(receive);
    EXPECT_TRUE(sent_done.status.ok()) << sent_done.status;
    EXPECT_TRUE(received_done.status.ok()) << received_done.status;
    EXPECT_TRUE(received.slots[2] == sent.slots[0]);
  }

  std::vector<DevicePtr> devices_;
  TestComm comm_;
};

// A rank may send to itself, as in MPI and NCCL: the engine delivers it as to any rank of
// its own, eagerly or once the receive is posted.
TEST_F(PointToPointTest, ARankSendsToItselfEager) {
  SendToItself(kSmall, true);
  SendToItself(kSmall, false);
}

TEST_F(PointToPointTest, ARankSendsToItselfRendezvous) {
  SendToItself(kLarge, true);
  SendToItself(kLarge, false);
}

TEST_F(PointToPointTest, ReceiveFirstOnBothRanksEager) { ExchangeReceivingFirst(kSmall); }

TEST_F(PointToPointTest, ReceiveFirstOnBothRanksRendezvous) { ExchangeReceivingFirst(kLarge); }

TEST_F(PointToPointTest, SendsOfOneTagMeetReceivesInSubmissionOrder) {
  // The large message goes by rendezvous and the small one eagerly right behind it, so the
  // small one arrives first; it must still meet the second receive.
  RankBuffers received[2], sent[2];
  std::future<Completion> first = Receive(1, kLarge, received[0]);
  std::future<Completion> second = Receive(1, kSmall, received[1]);
  std::future<Completion> large = Send(0, Pattern(kLarge * sizeof(float), 1), sent[0]);
  std::future<Completion> small = Send(0, Pattern(kSmall * sizeof(float), 2), sent[1]);
  for (auto* call : {&large, &small, &first, &second}) EXPECT_TRUE(Wait(*call).status.ok());
  EXPECT_TRUE(received[0].slots[2] == Pattern(kLarge * sizeof(float), 1));
  EXPECT_TRUE(received[1].slots[2] == Pattern(kSmall * sizeof(float), 2));
}

TEST_F(PointToPointTest, CollectiveWaitsForTheReceiveAheadOfIt) {
  RankBuffers received, sent, none;
  std::future<Completion> receive = Receive(0, kSmall, received);
  std::future<Completion> nop =
      Submit(*devices_[0], Describe(comm_, Collective::kNop, 0, 0), none.Views(), kDeadline);
  // A nop of another communicator, twice in a row: device 0 has run a whole turn since
  // both calls above were submitted, in which the first nop would have finished.
  TestComm other = MakeComm({devices_[0].get(), devices_[1].get()}, 72);
  ASSERT_TRUE(ConfigureAll(other).ok());
  for (int i = 0; i < 2; ++i) {
    std::future<Completion> settle =
        Submit(*devices_[0], Describe(other, Collective::kNop, 0, 0), none.Views());
    EXPECT_TRUE(Wait(settle).status.ok());
  }
  EXPECT_EQ(nop.wait_for(std::chrono::seconds(0)), std::future_status::timeout);

  std::future<Completion> send = Send(1, Pattern(kSmall * sizeof(float), 3), sent);
  EXPECT_TRUE(Wait(send).status.ok());
  EXPECT_TRUE(Wait(receive).status.ok());
  EXPECT_TRUE(Wait(nop).status.ok());
  EXPECT_TRUE(received.slots[2] == Pattern(kSmall * sizeof(float), 3));
}

TEST_F(PointToPointTest, SendOfWhatAReceiveAheadFillsWaitsForIt) {
  // Rank 1 forwards what it receives from its receive buffer: the send must read it only
  // once the receive wrote it. Rank 0 sends, then gets it back.
  RankBuffers sent, returned, middle;
  std::future<Completion> back = Receive(0, kLarge, returned);
  std::future<Completion> in = Receive(1, kLarge, middle);
  CallDescriptor forward = Describe(comm_, Collective::kSend, 1, kLarge);
  forward.peer = 0;
  CallBuffers from_middle = middle.Views();
  from_middle.views[static_cast<size_t>(Slot::kOp0)] =
      from_middle.views[static_cast<size_t>(Slot::kResult)];
  std::future<Completion> out = Submit(*devices_[1], forward, from_middle, kDeadline);
  std::future<Completion> first = Send(0, Pattern(kLarge * sizeof(float), 4), sent);
  for (auto* call : {&first, &in, &out, &back}) EXPECT_TRUE(Wait(*call).status.ok());
  EXPECT_TRUE(returned.slots[2] == Pattern(kLarge * sizeof(float), 4));
}

TEST_F(PointToPointTest, EveryReceiveUnderWayFailsWhenItsSenderLeaves) {
  RankBuffers received[2];
  std::future<Completion> first = Receive(0, kSmall, received[0]);
  std::future<Completion> second = Receive(0, kLarge, received[1]);
  devices_[1]->RemoveCommunicator(comm_.config.id, absl::UnavailableError("done"));
  const absl::Status left =
      absl::UnavailableError("rank 1 on peer daemon " + devices_[1]->DataAddress() + " left: done");
  EXPECT_EQ(Wait(first).status, left);
  EXPECT_EQ(Wait(second).status, left);
}

}  // namespace
}  // namespace cclo::hw::emu::testing
