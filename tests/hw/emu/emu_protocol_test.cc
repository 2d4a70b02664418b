// Eager and rendezvous between EmuDevices over loopback TCP and between ranks of one
// device: message sizes on both sides of eager_max_bytes and segment_bytes, the request
// arriving before and after its receive is posted, reduce receives by rendezvous, credits
// running out, and receive orders that would deadlock a sender waiting for credit.
//
// Ordering without sleeps: a device runs posted calls in order, so a Nop that completed
// on it proves every call submitted there before it has started; and one session carries
// a communicator's segments between two devices in order, so a message received proves
// every segment queued before it on the same session arrived first.
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {
namespace {

constexpr uint64_t kEagerBytes = 16 << 10;
constexpr uint64_t kSegmentBytes = 64 << 10;
constexpr uint64_t kEager = kEagerBytes / 4;      ///< float32 elements in an eager message
constexpr uint64_t kSegment = kSegmentBytes / 4;  ///< float32 elements in a segment

EmuConfig ProtocolConfig(uint32_t credits = 8) {
  EmuConfig config = TestConfig();
  config.segment_bytes = kSegmentBytes;
  config.eager_max_bytes = kEagerBytes;
  config.credits_per_peer = credits;
  return config;
}

CallDescriptor PointToPoint(const TestComm& comm, Collective collective, uint32_t rank,
                            uint32_t peer, uint64_t count, uint32_t tag,
                            DataType datatype = DataType::kFloat32) {
  CallDescriptor call = Describe(comm, collective, rank, count, datatype);
  call.peer = peer;
  call.tag = tag;
  return call;
}

std::vector<std::byte> Pattern(size_t bytes, int seed) {
  std::vector<std::byte> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = std::byte((i * 31 + seed) % 253);
  return data;
}

/// Runs a Nop on `rank` (which has no call pending) and waits for it: every call
/// submitted on its device before has started.
void Fence(const TestComm& comm, uint32_t rank) {
  RankBuffers none;
  auto nop = Submit(*comm.host[rank], Describe(comm, Collective::kNop, rank, 0), none.Views());
  ASSERT_TRUE(Wait(nop).status.ok());
}

class ProtocolTest : public ::testing::Test {
 protected:
  /// Devices A and B; ranks 0, 3, 4 and 5 on A, ranks 1 and 2 on B.
  void Start(const EmuConfig& config = ProtocolConfig()) {
    devices_ = MakeDevices(2, config);
    ASSERT_EQ(devices_.size(), 2u);
    a_ = devices_[0].get();
    b_ = devices_[1].get();
    comm_ = MakeComm({a_, b_, b_, a_, a_, a_}, 91);
    ASSERT_TRUE(ConfigureAll(comm_).ok());
  }

  /// Sends `count` floats from rank 0 to rank 1 (tag 1) and checks they arrive. With
  /// `request_first` the sender's request (or eager message) is at B before the receive
  /// is posted, else the receive is posted before anything is sent.
  void SendAcross(uint64_t count, bool request_first, int seed) {
    const std::vector<std::byte> data = Pattern(count * 4, seed);
    RankBuffers from, to;
    from.slots[0] = data;
    to.slots[2].resize(data.size());
    const CallDescriptor send = PointToPoint(comm_, Collective::kSend, 0, 1, count, 1);
    const CallDescriptor recv = PointToPoint(comm_, Collective::kRecv, 1, 0, count, 1);
    std::future<Completion> sent, received;
    if (request_first) {
      sent = Submit(*a_, send, from.Views());
      // Rank 3 to rank 2 on the same session, queued after rank 0's first segment.
      RankBuffers marker_from, marker_to;
      marker_from.slots[0] = Pattern(4, 0);
      marker_to.slots[2].resize(4);
      auto marker =
          Submit(*a_, PointToPoint(comm_, Collective::kSend, 3, 2, 1, 2), marker_from.Views());
      auto marked =
          Submit(*b_, PointToPoint(comm_, Collective::kRecv, 2, 3, 1, 2), marker_to.Views());
      ASSERT_TRUE(Wait(marked).status.ok());
      ASSERT_TRUE(Wait(marker).status.ok());
      received = Submit(*b_, recv, to.Views());
    } else {
      received = Submit(*b_, recv, to.Views());
      ASSERT_NO_FATAL_FAILURE(Fence(comm_, 2));
      sent = Submit(*a_, send, from.Views());
    }
    Completion done = Wait(sent);
    EXPECT_TRUE(done.status.ok()) << done.status;
    EXPECT_EQ(done.bytes_sent, data.size());
    done = Wait(received);
    EXPECT_TRUE(done.status.ok()) << done.status;
    EXPECT_TRUE(to.slots[2] == data) << count << " floats";
  }

  std::vector<DevicePtr> devices_;
  Device* a_ = nullptr;
  Device* b_ = nullptr;
  TestComm comm_;
};

class SizeTest : public ProtocolTest,
                 public ::testing::WithParamInterface<std::tuple<uint64_t, bool>> {};

TEST_P(SizeTest, ArrivesWholeByTheProtocolItsSizeCalls) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const auto [count, request_first] = GetParam();
  ASSERT_NO_FATAL_FAILURE(SendAcross(count, request_first, 7));
  const DeviceStats sender = a_->Stats();
  const bool eager = count * 4 <= kEagerBytes;
  // The marker message (request_first) is small, so eager too.
  EXPECT_EQ(sender.eager_messages, (eager ? 1u : 0u) + (request_first ? 1u : 0u));
  EXPECT_EQ(sender.rendezvous_messages, eager ? 0u : 1u);
  EXPECT_EQ(sender.eager_fallbacks, 0u);
  for (Device* device : {a_, b_}) {
    const DeviceStats stats = device->Stats();
    EXPECT_EQ(stats.rx_pool_bytes_used, 0u);
    EXPECT_EQ(stats.wire_errors, 0u);
    EXPECT_EQ(stats.calls_failed, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(AroundTheLimits, SizeTest,
                         ::testing::Combine(::testing::Values(0, 1, kEager - 1, kEager, kEager + 1,
                                                              kSegment - 1, kSegment, kSegment + 1,
                                                              3 * kSegment + 1),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<uint64_t, bool>>& info) {
                           return std::to_string(std::get<0>(info.param)) + "Floats" +
                                  (std::get<1>(info.param) ? "RequestFirst" : "ReceiveFirst");
                         });

class ReduceTest : public ProtocolTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(ReduceTest, RecursiveDoublingReducesEachSegmentAsItLands) {
  // Two ranks exchange whole vectors and reduce what they receive into their result.
  devices_ = MakeDevices(2, ProtocolConfig());
  ASSERT_EQ(devices_.size(), 2u);
  const TestComm comm = MakeComm({devices_[0].get(), devices_[1].get()}, 92);
  ASSERT_TRUE(ConfigureAll(comm).ok());
  const uint64_t count = GetParam();
  std::vector<RankBuffers> buffers(2);
  std::vector<int32_t> expected(count);
  std::vector<std::future<Completion>> futures;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    std::vector<int32_t> input(count);
    for (uint64_t i = 0; i < count; ++i) input[i] = int32_t(i * (rank + 2) - 1000 * rank);
    for (uint64_t i = 0; i < count; ++i) expected[i] += input[i];
    buffers[rank].slots[0].resize(count * 4);
    std::memcpy(buffers[rank].slots[0].data(), input.data(), count * 4);
    buffers[rank].slots[2].resize(count * 4);
    CallDescriptor call = Describe(comm, Collective::kAllreduce, rank, count, DataType::kInt32);
    call.algorithm = "recursive_doubling";
    futures.push_back(Submit(*devices_[rank], call, buffers[rank].Views()));
  }
  std::vector<std::byte> expected_bytes(count * 4);
  std::memcpy(expected_bytes.data(), expected.data(), expected_bytes.size());
  for (uint32_t rank = 0; rank < 2; ++rank) {
    Completion done = Wait(futures[rank]);
    EXPECT_TRUE(done.status.ok()) << done.status;
    EXPECT_TRUE(buffers[rank].slots[2] == expected_bytes) << "rank " << rank;
  }
  const bool eager = count * 4 <= kEagerBytes;
  for (const DevicePtr& device : devices_) {
    const DeviceStats stats = device->Stats();
    EXPECT_EQ(stats.eager_messages + stats.rendezvous_messages, 1u);
    EXPECT_EQ(stats.rendezvous_messages, eager ? 0u : 1u);
    EXPECT_EQ(stats.rx_pool_bytes_used, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(AroundTheLimits, ReduceTest,
                         ::testing::Values(kEager, kEager + 1, kSegment - 1, kSegment, kSegment + 1,
                                           5 * kSegment + 3));

TEST_F(ProtocolTest, SendersShortOfCreditGoRendezvousAndEverythingCompletes) {
  ASSERT_NO_FATAL_FAILURE(Start(ProtocolConfig(1)));
  EXPECT_EQ(b_->Stats().rx_pool_bytes_reserved, kEagerBytes);  // one credit for A
  // Ranks 0, 3 and 4 on A send small messages to B at once; nothing is received yet.
  struct Message {
    uint32_t src, dst, tag;
  };
  const Message messages[] = {{0, 1, 1}, {3, 2, 1}, {4, 1, 2}};
  std::vector<RankBuffers> from(3), to(3);
  std::vector<std::future<Completion>> sends, receives;
  for (int k = 0; k < 3; ++k) {
    from[k].slots[0] = Pattern(400, k);
    const Message& m = messages[k];
    sends.push_back(Submit(*a_, PointToPoint(comm_, Collective::kSend, m.src, m.dst, 100, m.tag),
                           from[k].Views()));
  }
  ASSERT_NO_FATAL_FAILURE(Fence(comm_, 5));
  // All three started: one went eagerly on the only credit, the others by rendezvous
  // (without waiting for the credit to come back).
  DeviceStats stats = a_->Stats();
  EXPECT_EQ(stats.eager_messages, 1u);
  EXPECT_EQ(stats.rendezvous_messages, 2u);
  EXPECT_EQ(stats.eager_fallbacks, 2u);
  // B receives them, rank 1 the later one first.
  for (int k : {2, 0, 1}) {
    to[k].slots[2].resize(400);
    const Message& m = messages[k];
    receives.push_back(Submit(*b_, PointToPoint(comm_, Collective::kRecv, m.dst, m.src, 100, m.tag),
                              to[k].Views()));
  }
  for (auto& future : receives) EXPECT_TRUE(Wait(future).status.ok());
  for (auto& future : sends) EXPECT_TRUE(Wait(future).status.ok());
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(to[k].slots[2] == from[k].slots[0]) << k;
  stats = a_->Stats();
  EXPECT_EQ(stats.eager_messages, 1u);
  EXPECT_EQ(stats.rendezvous_messages, 2u);
  // Once B applied the eager message its credit went back, ahead of anything B sends
  // later: when A has a message from B, it has the credit, and the next small one is eager.
  RankBuffers ping, pong;
  ping.slots[0] = Pattern(4, 0);
  pong.slots[2].resize(4);
  auto pinged = Submit(*b_, PointToPoint(comm_, Collective::kSend, 2, 5, 1, 7), ping.Views());
  auto ponged = Submit(*a_, PointToPoint(comm_, Collective::kRecv, 5, 2, 1, 7), pong.Views());
  ASSERT_TRUE(Wait(pinged).status.ok());
  ASSERT_TRUE(Wait(ponged).status.ok());
  ASSERT_NO_FATAL_FAILURE(SendAcross(100, false, 8));
  EXPECT_EQ(a_->Stats().eager_messages, 2u);
  EXPECT_EQ(b_->Stats().rx_pool_bytes_used, 0u);
  EXPECT_EQ(b_->Stats().wire_errors, 0u);
}

TEST_F(ProtocolTest, ReceivingBBeforeADoesNotWaitForACreditAHolds) {
  ASSERT_NO_FATAL_FAILURE(Start(ProtocolConfig(1)));
  // Rank 0 sends A (tag 1) then B (tag 2); rank 1 receives B first. A takes the only
  // credit and stays staged until B is in: B must not wait for that credit.
  RankBuffers a, b, got_a, got_b;
  a.slots[0] = Pattern(800, 1);
  b.slots[0] = Pattern(800, 2);
  got_a.slots[2].resize(800);
  got_b.slots[2].resize(800);
  auto sent_a = Submit(*a_, PointToPoint(comm_, Collective::kSend, 0, 1, 200, 1), a.Views());
  auto sent_b = Submit(*a_, PointToPoint(comm_, Collective::kSend, 0, 1, 200, 2), b.Views());
  auto recv_b = Submit(*b_, PointToPoint(comm_, Collective::kRecv, 1, 0, 200, 2), got_b.Views());
  auto recv_a = Submit(*b_, PointToPoint(comm_, Collective::kRecv, 1, 0, 200, 1), got_a.Views());
  for (auto* future : {&sent_a, &sent_b, &recv_b, &recv_a}) {
    Completion done = Wait(*future);
    EXPECT_TRUE(done.status.ok()) << done.status;
  }
  EXPECT_TRUE(got_a.slots[2] == a.slots[0]);
  EXPECT_TRUE(got_b.slots[2] == b.slots[0]);
  const DeviceStats stats = a_->Stats();
  EXPECT_EQ(stats.eager_messages, 1u);
  EXPECT_EQ(stats.rendezvous_messages, 1u);
  EXPECT_EQ(stats.eager_fallbacks, 1u);
}

TEST_F(ProtocolTest, LocalRanksUseEagerWhenSmallAndRendezvousOtherwise) {
  ASSERT_NO_FATAL_FAILURE(Start());
  // Ranks 1 and 2 live on B. Large messages in both orders, then a small one.
  for (const auto& [count, receive_first] : std::vector<std::pair<uint64_t, bool>>{
           {3 * kSegment + 1, false}, {3 * kSegment + 1, true}, {kEager, false}}) {
    const std::vector<std::byte> data = Pattern(count * 4, int(count));
    RankBuffers from, to;
    from.slots[0] = data;
    to.slots[2].resize(data.size());
    const CallDescriptor send = PointToPoint(comm_, Collective::kSend, 2, 1, count, 4);
    const CallDescriptor recv = PointToPoint(comm_, Collective::kRecv, 1, 2, count, 4);
    std::future<Completion> sent, received;
    if (receive_first) received = Submit(*b_, recv, to.Views());
    sent = Submit(*b_, send, from.Views());
    if (!receive_first) {
      ASSERT_NO_FATAL_FAILURE(Fence(comm_, 1));
      // A large send waits for its receive; a small one is staged and done.
      EXPECT_EQ(b_->Stats().rx_pool_bytes_used, count <= kEager ? kEagerBytes : 0u);
      received = Submit(*b_, recv, to.Views());
    }
    EXPECT_TRUE(Wait(sent).status.ok());
    EXPECT_TRUE(Wait(received).status.ok());
    EXPECT_TRUE(to.slots[2] == data) << count;
  }
  const DeviceStats stats = b_->Stats();
  EXPECT_EQ(stats.rendezvous_messages, 2u);
  EXPECT_EQ(stats.eager_messages, 1u);
  EXPECT_EQ(stats.eager_fallbacks, 0u);
  EXPECT_EQ(stats.rx_pool_bytes_used, 0u);
  EXPECT_EQ(stats.bytes_received, 0u);  // nothing came over the network
}

TEST_F(ProtocolTest, EagerOffSendsEverythingByRendezvous) {
  EmuConfig config = ProtocolConfig();
  config.eager_max_bytes = 0;
  ASSERT_NO_FATAL_FAILURE(Start(config));
  EXPECT_EQ(b_->Stats().rx_pool_bytes_reserved, 0u);
  ASSERT_NO_FATAL_FAILURE(SendAcross(0, false, 3));
  ASSERT_NO_FATAL_FAILURE(SendAcross(10, false, 4));
  const DeviceStats stats = a_->Stats();
  EXPECT_EQ(stats.eager_messages, 0u);
  EXPECT_EQ(stats.rendezvous_messages, 2u);
  EXPECT_EQ(stats.eager_fallbacks, 0u);
}

TEST_F(ProtocolTest, PeersWithDifferentEagerLimitsUseTheSmaller) {
  EmuConfig small = ProtocolConfig();
  small.eager_max_bytes = 4096;
  devices_ = MakeDevices(1, ProtocolConfig());
  std::vector<DevicePtr> more = MakeDevices(1, small);
  ASSERT_EQ(devices_.size() + more.size(), 2u);
  devices_.push_back(std::move(more[0]));
  a_ = devices_[0].get();
  b_ = devices_[1].get();
  comm_ = MakeComm({a_, b_, b_, a_, a_, a_}, 93);
  ASSERT_TRUE(ConfigureAll(comm_).ok());
  ASSERT_NO_FATAL_FAILURE(SendAcross(2048, false, 5));  // 8 KiB: above B's limit
  EXPECT_EQ(a_->Stats().rendezvous_messages, 1u);
  ASSERT_NO_FATAL_FAILURE(SendAcross(1024, false, 6));  // 4 KiB: eager both ways
  EXPECT_EQ(a_->Stats().eager_messages, 1u);
}

}  // namespace
}  // namespace cclo::hw::emu::testing
