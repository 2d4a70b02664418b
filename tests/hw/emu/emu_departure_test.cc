// EmuDevice when a peer engine leaves a communicator (RemoveCommunicator or shutdown, which
// end its sessions with BYE): what that peer sent before leaving is still received; calls
// that need more of it fail with UNAVAILABLE naming it; calls among the others go on.
//
// To know that a device has seen the departure before it runs a call, the test first
// queues, on the same rank, a receive that the leaving rank never sends: it fails when
// the departure is seen, and only then does a collective behind it start.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr uint32_t kNeverSent = 99;  ///< a tag nobody sends on

CallDescriptor PointToPoint(const TestComm& comm, Collective collective, uint32_t rank,
                            uint32_t peer, uint64_t count, uint32_t tag = 1) {
  CallDescriptor call = Describe(comm, collective, rank, count);
  call.peer = peer;
  call.tag = tag;
  return call;
}

std::vector<std::byte> Pattern(size_t bytes, int seed) {
  std::vector<std::byte> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = std::byte((i * 13 + seed) % 251);
  return data;
}

/// Removes the communicator from `device` and waits until that is done (a call posted
/// after it finds the communicator gone).
void RemoveAndWait(Device& device, const TestComm& comm, const std::string& reason) {
  device.RemoveCommunicator(comm.config.id, absl::UnavailableError(reason));
  RankBuffers none;
  auto after = Submit(device, Describe(comm, Collective::kNop, 0, 0), none.Views());
  EXPECT_EQ(Wait(after).status.code(), absl::StatusCode::kNotFound);
}

/// The message a call of `comm` fails with once `rank` on `device` left saying `reason`.
std::string Left(uint32_t rank, const Device& device, const std::string& reason) {
  return "rank " + std::to_string(rank) + " on peer daemon " + device.DataAddress() +
         " left: " + reason;
}

class EmuDepartureTest : public ::testing::Test {
 protected:
  void Start(size_t ranks, uint8_t seed, const EmuConfig& config = TestConfig()) {
    devices_ = MakeDevices(ranks, config);
    ASSERT_EQ(devices_.size(), ranks);
    std::vector<Device*> hosts;
    for (const DevicePtr& device : devices_) hosts.push_back(device.get());
    comm_ = MakeComm(hosts, seed);
    ASSERT_TRUE(ConfigureAll(comm_).ok());
  }

  /// On `rank`, a receive from `from` that never arrives, so it fails at the departure.
  std::future<Completion> Sentinel(uint32_t rank, uint32_t from) {
    sentinel_.slots[2].resize(4);
    return Submit(*devices_[rank],
                  PointToPoint(comm_, Collective::kRecv, rank, from, 1, kNeverSent),
                  sentinel_.Views(), absl::Hours(1));
  }

  std::vector<DevicePtr> devices_;
  TestComm comm_;
  RankBuffers sentinel_;
};

TEST_F(EmuDepartureTest, BcastFromARootThatLeftCompletesFromStagedData) {
  ASSERT_NO_FATAL_FAILURE(Start(2, 51));
  const std::string reason = "rank 0 left: its client (pid 42) exited";
  // Eager, so the root's send is done while rank 1 still waits for its sentinel.
  const std::vector<std::byte> data = Pattern(60000, 1);
  RankBuffers root, receiver;
  root.slots[2] = data;
  receiver.slots[2].resize(data.size());
  CallDescriptor bcast = Describe(comm_, Collective::kBcast, 1, data.size() / 4);
  auto sentinel = Sentinel(1, 0);
  auto received = Submit(*devices_[1], bcast, receiver.Views(), absl::Hours(1));
  bcast.rank = 0;
  auto sent = Submit(*devices_[0], bcast, root.Views());
  ASSERT_TRUE(Wait(sent).status.ok());
  RemoveAndWait(*devices_[0], comm_, reason);

  Completion told = Wait(sentinel);
  EXPECT_EQ(told.status, absl::UnavailableError(Left(0, *devices_[0], reason)));
  Completion done = Wait(received);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_TRUE(receiver.slots[2] == data);
  EXPECT_EQ(devices_[1]->Stats().rx_pool_bytes_used, 0u);
  EXPECT_EQ(devices_[0]->Stats().rx_pool_bytes_used, 0u);
}

TEST_F(EmuDepartureTest, BcastPostedRightAfterTheRootLeftCompletes) {
  for (uint8_t round = 0; round < 5; ++round) {
    ASSERT_NO_FATAL_FAILURE(Start(2, 60 + round));
    // Eager (at most eager_max_bytes): the root's send is done before rank 1 posts.
    const std::vector<std::byte> data = Pattern(60000, round);
    RankBuffers root, receiver;
    root.slots[2] = data;
    receiver.slots[2].resize(data.size());
    CallDescriptor bcast = Describe(comm_, Collective::kBcast, 0, data.size() / 4);
    auto sent = Submit(*devices_[0], bcast, root.Views());
    ASSERT_TRUE(Wait(sent).status.ok());
    devices_[0]->RemoveCommunicator(comm_.config.id, absl::UnavailableError("done"));
    bcast.rank = 1;
    auto received = Submit(*devices_[1], bcast, receiver.Views());
    Completion done = Wait(received);
    EXPECT_TRUE(done.status.ok()) << "round " << int(round) << ": " << done.status;
    EXPECT_TRUE(receiver.slots[2] == data) << "round " << int(round);
  }
}

TEST_F(EmuDepartureTest, AllreduceSideThatFinishedFirstMayLeaveAtOnce) {
  // Small segments, eager messages of up to one segment and a pool of eight buffers:
  // early data is staged, credits run out and messages go by rendezvous while the two
  // sides run at different times.
  EmuConfig config = TestConfig();
  config.segment_bytes = 4096;
  config.eager_max_bytes = 4096;
  config.rx_pool_bytes = 8 * 4096;
  constexpr uint64_t kCount = 30000;
  for (uint8_t round = 0; round < 6; ++round) {
    ASSERT_NO_FATAL_FAILURE(Start(2, 70 + round, config));
    const uint32_t leaver = round % 2, stayer = 1 - leaver;
    std::vector<RankBuffers> buffers(2);
    std::vector<int32_t> expected(kCount);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      std::vector<int32_t> input(kCount);
      for (uint64_t i = 0; i < kCount; ++i) input[i] = int32_t(i * (rank + 3) + round);
      for (uint64_t i = 0; i < kCount; ++i) expected[i] += input[i];
      buffers[rank].slots[0].resize(kCount * 4);
      std::memcpy(buffers[rank].slots[0].data(), input.data(), kCount * 4);
      buffers[rank].slots[2].resize(kCount * 4);
    }
    // Half the rounds the leaving side posts first, half the staying side.
    std::vector<std::future<Completion>> futures(2);
    for (uint32_t rank : round < 3 ? std::vector{leaver, stayer} : std::vector{stayer, leaver}) {
      CallDescriptor call = Describe(comm_, Collective::kAllreduce, rank, kCount, DataType::kInt32);
      call.algorithm = "ring";
      futures[rank] = Submit(*devices_[rank], call, buffers[rank].Views());
    }
    std::vector<std::byte> expected_bytes(kCount * 4);
    std::memcpy(expected_bytes.data(), expected.data(), expected_bytes.size());
    Completion left = Wait(futures[leaver]);
    ASSERT_TRUE(left.status.ok()) << left.status;
    RemoveAndWait(*devices_[leaver], comm_, "finished");
    Completion stayed = Wait(futures[stayer]);
    EXPECT_TRUE(stayed.status.ok()) << "round " << int(round) << ": " << stayed.status;
    EXPECT_TRUE(buffers[stayer].slots[2] == expected_bytes) << "round " << int(round);
    EXPECT_TRUE(buffers[leaver].slots[2] == expected_bytes) << "round " << int(round);
    RemoveAndWait(*devices_[stayer], comm_, "finished");
    for (const DevicePtr& device : devices_) EXPECT_EQ(device->Stats().rx_pool_bytes_used, 0u);
  }
}

TEST_F(EmuDepartureTest, ReceiveFromALeftRankWithNothingStagedFailsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(Start(2, 52));
  const std::string reason = "rank 0 left: its client (pid 7) exited";
  auto sentinel = Sentinel(1, 0);
  RemoveAndWait(*devices_[0], comm_, reason);
  const absl::Status left = absl::UnavailableError(Left(0, *devices_[0], reason));
  EXPECT_EQ(Wait(sentinel).status, left);  // pending at the departure

  RankBuffers buffers;
  buffers.slots[2].resize(40);
  auto later = Submit(*devices_[1], PointToPoint(comm_, Collective::kRecv, 1, 0, 10),
                      buffers.Views(), absl::Hours(1));
  EXPECT_EQ(Wait(later).status, left);  // posted after it
  CallDescriptor bcast = Describe(comm_, Collective::kBcast, 1, 10);
  auto collective = Submit(*devices_[1], bcast, buffers.Views(), absl::Hours(1));
  EXPECT_EQ(Wait(collective).status, left);
  const DeviceStats stats = devices_[1]->Stats();
  EXPECT_EQ(stats.sessions_up, 0u);
  EXPECT_EQ(stats.sessions_left, 1u);
  EXPECT_EQ(stats.sessions_connecting + stats.sessions_lost, 0u);
}

TEST_F(EmuDepartureTest, SendToALeftRankFails) {
  ASSERT_NO_FATAL_FAILURE(Start(2, 53));
  auto sentinel = Sentinel(1, 0);
  RemoveAndWait(*devices_[0], comm_, "gone");
  ASSERT_EQ(Wait(sentinel).status.code(), absl::StatusCode::kUnavailable);
  RankBuffers buffers;
  buffers.slots[0] = Pattern(40, 3);
  auto send = Submit(*devices_[1], PointToPoint(comm_, Collective::kSend, 1, 0, 10),
                     buffers.Views(), absl::Hours(1));
  Completion failed = Wait(send);
  EXPECT_EQ(failed.status, absl::UnavailableError(Left(0, *devices_[0], "gone")));
  EXPECT_EQ(failed.bytes_sent, 0u);
}

TEST_F(EmuDepartureTest, RanksThatStayedKeepTalking) {
  ASSERT_NO_FATAL_FAILURE(Start(3, 54));
  auto on_rank0 = Sentinel(0, 2);
  RankBuffers sentinel1;
  sentinel1.slots[2].resize(4);
  auto on_rank1 = Submit(*devices_[1], PointToPoint(comm_, Collective::kRecv, 1, 2, 1, kNeverSent),
                         sentinel1.Views(), absl::Hours(1));
  RemoveAndWait(*devices_[2], comm_, "rank 2 is done");
  const absl::Status left = absl::UnavailableError(Left(2, *devices_[2], "rank 2 is done"));
  EXPECT_EQ(Wait(on_rank0).status, left);
  EXPECT_EQ(Wait(on_rank1).status, left);

  // A collective needs rank 2 and fails on both; point-to-point between 0 and 1 works,
  // before and after it.
  for (int pass = 0; pass < 2; ++pass) {
    RankBuffers from, to;
    from.slots[0] = Pattern(300000, pass);
    to.slots[2].resize(from.slots[0].size());
    auto send =
        Submit(*devices_[0], PointToPoint(comm_, Collective::kSend, 0, 1, 75000, 5), from.Views());
    auto recv =
        Submit(*devices_[1], PointToPoint(comm_, Collective::kRecv, 1, 0, 75000, 5), to.Views());
    EXPECT_TRUE(Wait(send).status.ok());
    EXPECT_TRUE(Wait(recv).status.ok());
    EXPECT_TRUE(to.slots[2] == from.slots[0]) << "pass " << pass;
    if (pass == 1) break;
    std::vector<RankBuffers> buffers(2);
    std::vector<std::future<Completion>> allreduce;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      buffers[rank].slots[0].resize(400);
      buffers[rank].slots[2].resize(400);
      CallDescriptor call = Describe(comm_, Collective::kAllreduce, rank, 100);
      call.algorithm = "ring";  // every rank talks to rank 2 (recursive doubling would not)
      allreduce.push_back(Submit(*devices_[rank], call, buffers[rank].Views(), absl::Hours(1)));
    }
    for (auto& future : allreduce) EXPECT_EQ(Wait(future).status, left);
  }
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(devices_[rank]->Stats().sessions_up, 1u);  // between 0 and 1
    EXPECT_EQ(devices_[rank]->Stats().wire_errors, 0u);
  }
}

// Ranks 0 and 1 on one device, 2 on another. Rank 0 leaves while rank 1 stays: its device
// tells the other (DEPART), whose calls that need rank 0 fail at once naming it, and whose
// link to it stays up for rank 1. A second departure of the same rank changes nothing.
TEST_F(EmuDepartureTest, ALocalRankThatLeftIsToldToPeersAndTheOthersKeepTalking) {
  devices_ = MakeDevices(2);
  ASSERT_EQ(devices_.size(), 2u);
  comm_ = MakeComm({devices_[0].get(), devices_[0].get(), devices_[1].get()}, 57);
  ASSERT_TRUE(ConfigureAll(comm_).ok());
  sentinel_.slots[2].resize(4);
  auto on_rank2 = Submit(*devices_[1], PointToPoint(comm_, Collective::kRecv, 2, 0, 1, kNeverSent),
                         sentinel_.Views(), absl::Hours(1));
  const std::string reason = "rank 0 destroyed the communicator";
  devices_[0]->DepartLocalRank(comm_.config.id, 0, absl::UnavailableError(reason));
  const absl::Status left = absl::UnavailableError(Left(0, *devices_[0], reason));
  EXPECT_EQ(Wait(on_rank2).status, left);
  // Told again, its device keeps the first: the peers hear of it once.
  devices_[0]->DepartLocalRank(comm_.config.id, 0, absl::UnavailableError("again"));
  // Later calls too: a send to it, a receive from it.
  RankBuffers none;
  none.slots[0].resize(4);
  none.slots[2].resize(4);
  for (Collective collective : {Collective::kSend, Collective::kRecv}) {
    auto call = Submit(*devices_[1], PointToPoint(comm_, collective, 2, 0, 1), none.Views(),
                       absl::Hours(1));
    EXPECT_EQ(Wait(call).status, left);
  }
  // Ranks 1 and 2 exchange both ways, eagerly and by rendezvous.
  for (uint64_t bytes : {1000, 300000}) {
    for (uint32_t from : {1, 2}) {
      const uint32_t to = 3 - from;
      RankBuffers source, target;
      source.slots[0] = Pattern(bytes, static_cast<int>(from));
      target.slots[2].resize(bytes);
      auto send =
          Submit(*devices_[from - 1],
                 PointToPoint(comm_, Collective::kSend, from, to, bytes / 4, 5), source.Views());
      auto recv =
          Submit(*devices_[to - 1], PointToPoint(comm_, Collective::kRecv, to, from, bytes / 4, 5),
                 target.Views());
      EXPECT_TRUE(Wait(send).status.ok());
      EXPECT_TRUE(Wait(recv).status.ok());
      EXPECT_TRUE(target.slots[2] == source.slots[0]) << bytes << " bytes from " << from;
    }
  }
  for (const DevicePtr& device : devices_) {
    EXPECT_EQ(device->Stats().sessions_up, 1u);
    EXPECT_EQ(device->Stats().sessions_left, 0u);
    EXPECT_EQ(device->Stats().wire_errors, 0u);
  }
}

// A rank that leaves with a send of its own still running (it runs on): the peers hear of
// the departure only once it is done, so its message still arrives whole.
TEST_F(EmuDepartureTest, ALocalRankThatLeftIsToldOnceItsOwnCallsAreDone) {
  devices_ = MakeDevices(2);
  ASSERT_EQ(devices_.size(), 2u);
  comm_ = MakeComm({devices_[0].get(), devices_[0].get(), devices_[1].get()}, 58);
  ASSERT_TRUE(ConfigureAll(comm_).ok());
  // Past the eager limit: the send waits for rank 2's receive.
  RankBuffers source, target;
  source.slots[0] = Pattern(300000, 3);
  target.slots[2].resize(source.slots[0].size());
  auto send = Submit(*devices_[0], PointToPoint(comm_, Collective::kSend, 0, 2, 75000),
                     source.Views(), absl::Hours(1));
  const std::string reason = "rank 0 destroyed the communicator";
  devices_[0]->DepartLocalRank(comm_.config.id, 0, absl::UnavailableError(reason));
  auto recv = Submit(*devices_[1], PointToPoint(comm_, Collective::kRecv, 2, 0, 75000),
                     target.Views(), absl::Hours(1));
  EXPECT_TRUE(Wait(send).status.ok());
  Completion received = Wait(recv);
  EXPECT_TRUE(received.status.ok()) << received.status;
  EXPECT_TRUE(target.slots[2] == source.slots[0]);
  // Then nothing more comes from it.
  sentinel_.slots[2].resize(4);
  auto more = Submit(*devices_[1], PointToPoint(comm_, Collective::kRecv, 2, 0, 1, kNeverSent),
                     sentinel_.Views(), absl::Hours(1));
  EXPECT_EQ(Wait(more).status, absl::UnavailableError(Left(0, *devices_[0], reason)));
}

TEST_F(EmuDepartureTest, StagedMessageOfAnotherSizeForAReceiveNeverStartedIsInvalid) {
  ASSERT_NO_FATAL_FAILURE(Start(3, 56));
  // Rank 1 gathers 8 elements to rank 0 (eager: staged there), then sends on tag 5: once
  // that is received, so is the first. Rank 0 gathers 4 once rank 2 left: its gather fails
  // before it starts its receives, and the one from rank 1 does not fit what was staged.
  CallDescriptor gather = Describe(comm_, Collective::kGather, 1, 8);
  gather.algorithm = "all_to_one";
  RankBuffers piece, marker, marked, root;
  piece.slots[0] = Pattern(32, 1);
  marker.slots[0] = Pattern(4, 2);
  marked.slots[2].resize(4);
  root.slots[0] = Pattern(16, 3);
  root.slots[2].resize(48);
  auto sent = Submit(*devices_[1], gather, piece.Views());
  auto marker_sent =
      Submit(*devices_[1], PointToPoint(comm_, Collective::kSend, 1, 0, 1, 5), marker.Views());
  auto sentinel = Sentinel(0, 2);
  auto marker_received =
      Submit(*devices_[0], PointToPoint(comm_, Collective::kRecv, 0, 1, 1, 5), marked.Views());
  gather.rank = 0;
  gather.count = 4;
  auto gathered = Submit(*devices_[0], gather, root.Views());
  ASSERT_TRUE(Wait(sent).status.ok());
  ASSERT_TRUE(Wait(marker_sent).status.ok());
  ASSERT_TRUE(Wait(marker_received).status.ok());
  EXPECT_EQ(devices_[0]->Stats().rx_pool_bytes_used, TestConfig().eager_max_bytes);

  RemoveAndWait(*devices_[2], comm_, "gone");
  EXPECT_EQ(Wait(sentinel).status.code(), absl::StatusCode::kUnavailable);
  Completion failed = Wait(gathered);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status.message(),
              HasSubstr("invalid data from peer daemon " + devices_[1]->DataAddress()));
  EXPECT_THAT(failed.status.message(), HasSubstr("has 32 bytes but the posted receive expects 16"));
  EXPECT_EQ(devices_[0]->Stats().wire_errors, 1u);
  EXPECT_EQ(devices_[0]->Stats().rx_pool_bytes_used, 0u);  // not kept until removal
}

TEST_F(EmuDepartureTest, RemovalFreesStagedData) {
  ASSERT_NO_FATAL_FAILURE(Start(2, 55));
  // Rank 0 sends an eager message rank 1 never receives (staged), then one it does: when
  // that one is in, so is the first.
  const uint64_t staged_bytes = TestConfig().eager_max_bytes;
  RankBuffers unmatched, matched, received;
  unmatched.slots[0] = Pattern(60000, 4);
  matched.slots[0] = Pattern(40, 5);
  received.slots[2].resize(40);
  auto recv =
      Submit(*devices_[1], PointToPoint(comm_, Collective::kRecv, 1, 0, 10, 2), received.Views());
  auto staged = Submit(*devices_[0], PointToPoint(comm_, Collective::kSend, 0, 1, 15000, 3),
                       unmatched.Views());
  auto send =
      Submit(*devices_[0], PointToPoint(comm_, Collective::kSend, 0, 1, 10, 2), matched.Views());
  ASSERT_TRUE(Wait(staged).status.ok());
  ASSERT_TRUE(Wait(send).status.ok());
  ASSERT_TRUE(Wait(recv).status.ok());
  EXPECT_EQ(devices_[1]->Stats().rx_pool_bytes_used, staged_bytes);

  // Rank 0 leaving keeps the whole staged message for a receive that may still come...
  auto sentinel = Sentinel(1, 0);
  RemoveAndWait(*devices_[0], comm_, "gone");
  EXPECT_EQ(Wait(sentinel).status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(devices_[1]->Stats().rx_pool_bytes_used, staged_bytes);
  // ...and removing the communicator frees it.
  RemoveAndWait(*devices_[1], comm_, "gone too");
  EXPECT_EQ(devices_[1]->Stats().rx_pool_bytes_used, 0u);
}

// A communicator removed with no call of it pending is a normal end, logged at info; one
// removed while calls wait is a warning that says what they waited for.
TEST_F(EmuDepartureTest, RemovalWarnsOnlyWhereCallsAreCutOff) {
  ASSERT_NO_FATAL_FAILURE(Start(2, 91));
  auto log = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(100);
  spdlog::default_logger()->sinks().push_back(log);
  const spdlog::level::level_enum level = spdlog::default_logger()->level();
  spdlog::default_logger()->set_level(spdlog::level::info);
  auto sentinel = Sentinel(1, 0);
  RemoveAndWait(*devices_[0], comm_, "rank 0 destroyed the communicator");
  EXPECT_EQ(Wait(sentinel).status.code(), absl::StatusCode::kUnavailable);
  auto cut_off = Sentinel(1, 1);
  RemoveAndWait(*devices_[1], comm_, "rank 1 destroyed the communicator");
  EXPECT_EQ(Wait(cut_off).status.code(), absl::StatusCode::kUnavailable);
  spdlog::default_logger()->set_level(level);
  spdlog::default_logger()->sinks().pop_back();

  std::vector<std::string> infos, warnings;
  for (const spdlog::details::log_msg_buffer& line : log->last_raw()) {
    std::string text(line.payload.data(), line.payload.size());
    (line.level == spdlog::level::warn ? warnings : infos).push_back(std::move(text));
  }
  EXPECT_THAT(infos, Contains(HasSubstr("removed: rank 0 destroyed the communicator")));
  EXPECT_THAT(warnings, Contains(HasSubstr("broken: rank 1 destroyed the communicator; calls "
                                           "running: recv on rank 1: ")));
  for (const std::string& warning : warnings) {
    EXPECT_THAT(warning, ::testing::Not(HasSubstr("rank 0 destroyed"))) << warning;
  }
}

}  // namespace
}  // namespace cclo::hw::emu::testing
