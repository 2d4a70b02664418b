// EmuDevice under failure: refused handshakes, bad calls, deadlines, lost peers.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;

RankBuffers RecvBuffers(uint64_t count) {
  RankBuffers buffers;
  buffers.slots[2].resize(count * 4);
  return buffers;
}

CallDescriptor Recv(const TestComm& comm, uint32_t rank, uint32_t from, uint64_t count) {
  CallDescriptor call = Describe(comm, Collective::kRecv, rank, count);
  call.peer = from;
  call.tag = 1;
  return call;
}

TEST(EmuConfigTest, RejectsBadConfigAndTakenPort) {
  EmuConfig config = TestConfig();
  config.segment_bytes = 1000;
  EXPECT_EQ(CreateEmuDevice(config).status().code(), absl::StatusCode::kInvalidArgument);
  config = TestConfig();
  config.rx_pool_bytes = config.segment_bytes - 1;
  EXPECT_THAT(CreateEmuDevice(config).status().message(), HasSubstr("rx_pool_bytes"));
  config = TestConfig();
  config.eager_max_bytes = config.segment_bytes + 8;
  EXPECT_EQ(CreateEmuDevice(config).status(),
            absl::InvalidArgumentError("eager_max_bytes 65544 exceeds segment_bytes 65536: an "
                                       "eager message is one segment"));
  config = TestConfig();
  config.credits_per_peer = 65537;
  EXPECT_EQ(CreateEmuDevice(config).status(),
            absl::InvalidArgumentError("credits_per_peer 65537 exceeds the maximum of 65536"));

  std::vector<DevicePtr> devices = MakeDevices(1);
  const std::string address = devices[0]->DataAddress();
  config = TestConfig();
  config.data_port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  absl::StatusOr<DevicePtr> taken = CreateEmuDevice(config);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(taken.status().message(), HasSubstr("Address already in use"));
}

TEST(EmuFailureTest, WrongSecretIsRefused) {
  std::vector<DevicePtr> devices = MakeDevices(2);
  const TestComm comm = MakeComm({devices[0].get(), devices[1].get()}, 21);
  CommunicatorConfig wrong = comm.config;
  wrong.secret[0] ^= 1;
  // Each connects to the other (one session each way) and, as connector, finds the
  // other's proof wrong at once.
  const std::vector<absl::Status> statuses =
      Configure({{devices[0].get(), comm.config}, {devices[1].get(), wrong}}, absl::Seconds(2));
  for (const absl::Status& status : statuses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
    EXPECT_THAT(status.message(), HasSubstr("authentication failed"));
  }
  EXPECT_GE(devices[0]->Stats().wire_errors + devices[1]->Stats().wire_errors, 1u);
  for (const auto& device : devices) {
    const DeviceStats stats = device->Stats();
    EXPECT_EQ(stats.sessions_up, 0u);
    // The failed configure broke the communicator; it is still installed, its session lost.
    EXPECT_EQ(stats.sessions_lost, 1u);
    EXPECT_EQ(stats.sessions_connecting + stats.sessions_left, 0u);
  }
}

TEST(EmuFailureTest, UnknownCommunicatorIsRefused) {
  std::vector<DevicePtr> devices = MakeDevices(2);
  const bool first_connects = devices[0]->DataAddress() < devices[1]->DataAddress();
  Device& connector = *devices[first_connects ? 0 : 1];
  Device& acceptor = *devices[first_connects ? 1 : 0];
  const TestComm comm = MakeComm({&connector, &acceptor}, 22);
  const std::vector<absl::Status> statuses = Configure({{&connector, comm.config}});
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(statuses[0].message(), HasSubstr("unknown communicator"));
  EXPECT_EQ(acceptor.Stats().wire_errors, 1u);
}

TEST(EmuFailureTest, BadCallsFailWithoutBreakingTheCommunicator) {
  std::vector<DevicePtr> devices = MakeDevices(1);
  const TestComm comm = MakeComm({devices[0].get(), devices[0].get()}, 23);
  ASSERT_TRUE(ConfigureAll(comm).ok());

  CallDescriptor unknown = Describe(comm, Collective::kAllreduce, 0, 4);
  unknown.comm[0] ^= 0xFF;
  RankBuffers buffers;
  auto future = Submit(*devices[0], unknown, buffers.Views());
  EXPECT_EQ(Wait(future).status.code(), absl::StatusCode::kNotFound);

  // op0 holds 3 elements where the allreduce needs 4.
  buffers.slots[0].resize(12);
  buffers.slots[2].resize(16);
  future = Submit(*devices[0], Describe(comm, Collective::kAllreduce, 0, 4), buffers.Views());
  Completion completion = Wait(future);
  EXPECT_EQ(completion.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(completion.status.message(), HasSubstr("outside the op0 buffer of 12 bytes"));

  CallDescriptor send = Describe(comm, Collective::kSend, 0, 4);
  send.peer = 1;
  send.tag = 1;
  buffers.slots[0].resize(16, std::byte{7});
  future = Submit(*devices[0], send, buffers.Views());
  RankBuffers received = RecvBuffers(4);
  auto recv = Submit(*devices[0], Recv(comm, 1, 0, 4), received.Views());
  EXPECT_TRUE(Wait(recv).status.ok());
  EXPECT_TRUE(Wait(future).status.ok());
  EXPECT_EQ(received.slots[2], buffers.slots[0]);
  EXPECT_EQ(devices[0]->Stats().calls_failed, 2u);
}

TEST(EmuFailureTest, CallsOfARankRunInSubmissionOrder) {
  std::vector<DevicePtr> devices = MakeDevices(2);
  const TestComm comm = MakeComm({devices[0].get(), devices[1].get()}, 24);
  ASSERT_TRUE(ConfigureAll(comm).ok());
  constexpr int kCalls = 8;
  std::vector<RankBuffers> sent(kCalls), received(kCalls);
  std::vector<std::future<Completion>> futures;
  // The receiver posts first, all at once; the k-th receive must get the k-th message.
  for (int k = 0; k < kCalls; ++k) {
    received[k] = RecvBuffers(20000);
    futures.push_back(Submit(*devices[1], Recv(comm, 1, 0, 20000), received[k].Views()));
  }
  for (int k = 0; k < kCalls; ++k) {
    sent[k].slots[0].assign(80000, std::byte(k + 1));
    CallDescriptor send = Describe(comm, Collective::kSend, 0, 20000);
    send.peer = 1;
    send.tag = 1;
    futures.push_back(Submit(*devices[0], send, sent[k].Views()));
  }
  for (auto& future : futures) EXPECT_TRUE(Wait(future).status.ok());
  for (int k = 0; k < kCalls; ++k) EXPECT_EQ(received[k].slots[2], sent[k].slots[0]) << k;
}

TEST(EmuFailureTest, DeadlineExpiryBreaksTheCommunicator) {
  std::vector<DevicePtr> devices = MakeDevices(2);
  const TestComm comm = MakeComm({devices[0].get(), devices[1].get()}, 25);
  ASSERT_TRUE(ConfigureAll(comm).ok());
  RankBuffers lonely = RecvBuffers(10), waiting = RecvBuffers(10), later = RecvBuffers(10);
  // Rank 0 waits for rank 1 with a long deadline; rank 1's receive has no sender.
  auto peer = Submit(*devices[0], Recv(comm, 0, 1, 10), waiting.Views());
  auto expiring =
      Submit(*devices[1], Recv(comm, 1, 0, 10), lonely.Views(), absl::Milliseconds(200));
  Completion expired = Wait(expiring);
  EXPECT_EQ(expired.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(expired.status.message(), HasSubstr("recv on rank 1"));
  EXPECT_THAT(std::string(expired.status.message()),
              EndsWith("did not finish by its deadline: 0 of 1 moves done; move 0: receive "
                       "from rank 0 (tag 1, message 0): nothing arrived"));

  auto next = Submit(*devices[1], Recv(comm, 1, 0, 10), later.Views());
  Completion broken = Wait(next);
  EXPECT_EQ(broken.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(broken.status.message(), HasSubstr("missed its deadline"));

  // The other side hears of it (rank 1's engine broke it, saying why) long before its own
  // deadline.
  Completion told = Wait(peer);
  EXPECT_EQ(told.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(told.status.message()),
              ::testing::StartsWith("peer daemon " + devices[1]->DataAddress() +
                                    " broke the communicator: recv on rank 1 "));
  EXPECT_THAT(told.status.message(), HasSubstr("missed its deadline"));
}

TEST(EmuFailureTest, AnExpiredSendSaysItWaitedForItsClearToSend) {
  std::vector<DevicePtr> devices = MakeDevices(2);
  const TestComm comm = MakeComm({devices[0].get(), devices[1].get()}, 28);
  ASSERT_TRUE(ConfigureAll(comm).ok());
  // Past the eager limit, so the send asks and rank 1, which posts no receive, never
  // clears it.
  constexpr uint64_t kCount = 1 << 18;
  RankBuffers data;
  data.slots[0].resize(kCount * 4);
  CallDescriptor send = Describe(comm, Collective::kSend, 0, kCount);
  send.peer = 1;
  send.tag = 1;
  auto sending = Submit(*devices[0], send, data.Views(), absl::Milliseconds(200));
  Completion expired = Wait(sending);
  EXPECT_EQ(expired.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(expired.status.message()),
              EndsWith("did not finish by its deadline: 0 of 1 moves done; move 0: send to "
                       "rank 1 (tag 1, message 0): asked, waiting for its clear-to-send"));
}

TEST(EmuFailureTest, DestroyedPeerFailsPendingCallsAndSparesOtherCommunicators) {
  std::vector<DevicePtr> devices = MakeDevices(3);
  const TestComm doomed = MakeComm({devices[0].get(), devices[1].get()}, 26);
  const TestComm healthy = MakeComm({devices[0].get(), devices[2].get()}, 27);
  ASSERT_TRUE(ConfigureAll(doomed).ok());
  ASSERT_TRUE(ConfigureAll(healthy).ok());
  const std::string lost_address = devices[1]->DataAddress();

  RankBuffers a = RecvBuffers(1000), b = RecvBuffers(1000);
  auto on_survivor = Submit(*devices[0], Recv(doomed, 0, 1, 1000), a.Views(), absl::Hours(1));
  auto on_lost = Submit(*devices[1], Recv(doomed, 1, 0, 1000), b.Views(), absl::Hours(1));
  devices[1].reset();  // mid-call

  Completion shut = Wait(on_lost);
  EXPECT_EQ(shut.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(shut.status.message(), HasSubstr("engine shutting down"));
  // The engine said goodbye on its way out.
  const std::string left = "rank 1 on peer daemon " + lost_address + " left: peer daemon " +
                           lost_address + " shutting down";
  Completion lost = Wait(on_survivor);
  EXPECT_EQ(lost.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(lost.status.message(), left);

  // Later calls that need rank 1 fail at once, naming it.
  auto again = Submit(*devices[0], Recv(doomed, 0, 1, 1000), a.Views(), absl::Hours(1));
  EXPECT_EQ(Wait(again).status.message(), left);

  // The other communicator keeps working.
  std::vector<RankBuffers> buffers(2);
  std::vector<std::future<Completion>> futures;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    buffers[rank].slots[0].assign(4000, std::byte{1});
    buffers[rank].slots[2].resize(4000);
    futures.push_back(Submit(*healthy.host[rank],
                             Describe(healthy, Collective::kAllreduce, rank, 1000, DataType::kInt8),
                             buffers[rank].Views()));
  }
  for (auto& future : futures) EXPECT_TRUE(Wait(future).status.ok());
}

TEST(EmuFailureTest, RemovedCommunicatorFailsItsCalls) {
  std::vector<DevicePtr> devices = MakeDevices(2);
  const TestComm comm = MakeComm({devices[0].get(), devices[1].get()}, 28);
  ASSERT_TRUE(ConfigureAll(comm).ok());
  RankBuffers buffers = RecvBuffers(10);
  auto pending = Submit(*devices[0], Recv(comm, 0, 1, 10), buffers.Views(), absl::Hours(1));
  devices[0]->RemoveCommunicator(comm.config.id, absl::CancelledError("tenant left"));
  Completion removed = Wait(pending);
  EXPECT_EQ(removed.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(removed.status.message(), "tenant left");
  auto after = Submit(*devices[0], Recv(comm, 0, 1, 10), buffers.Views());
  EXPECT_EQ(Wait(after).status.code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cclo::hw::emu::testing
