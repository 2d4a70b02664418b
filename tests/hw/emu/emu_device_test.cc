// Collectives on EmuDevices over loopback TCP and local copies, checked against a
// reference computed here: every topology x count x collective.
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {
namespace {

struct Topology {
  std::string name;
  size_t devices;
  std::vector<size_t> device_of_rank;
};

const Topology kTopologies[] = {
    {"TwoDevices", 2, {0, 1}},
    {"ThreeDevices", 3, {0, 1, 2}},
    {"OneDeviceTwoRanks", 1, {0, 0}},
    {"TwoDevicesFourRanks", 2, {0, 1, 1, 0}},
};
const uint64_t kCounts[] = {0, 1, 7, 1000, 300000};

template <typename T>
std::vector<std::byte> Bytes(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// Small integers as floats: every sum below is exact, whatever the reduction order.
std::vector<float> Floats(uint64_t count, uint32_t rank) {
  std::vector<float> values(count);
  for (uint64_t i = 0; i < count; ++i) values[i] = float((i * 7 + rank * 13) % 101) - 50.0f;
  return values;
}

std::vector<int32_t> Ints(uint64_t count, uint32_t rank) {
  std::mt19937 random(rank + 1);
  std::vector<int32_t> values(count);
  for (int32_t& v : values) v = static_cast<int32_t>(random());
  return values;
}

class CollectiveTest : public ::testing::TestWithParam<std::tuple<Topology, uint64_t>> {
 protected:
  void SetUp() override {
    const Topology& topology = std::get<0>(GetParam());
    devices_ = MakeDevices(topology.devices);
    ASSERT_EQ(devices_.size(), topology.devices);
    std::vector<Device*> hosts;
    for (size_t device : topology.device_of_rank) hosts.push_back(devices_[device].get());
    comm_ = MakeComm(hosts, 11);
    ASSERT_TRUE(ConfigureAll(comm_).ok());
    buffers_.resize(size());
  }

  void TearDown() override {
    for (const DevicePtr& device : devices_) {
      const DeviceStats stats = device->Stats();
      EXPECT_EQ(stats.wire_errors, 0u);
      EXPECT_EQ(stats.calls_failed, 0u);
      EXPECT_EQ(stats.rx_pool_bytes_used, 0u);  // every staged segment was consumed
    }
  }

  uint32_t size() const { return static_cast<uint32_t>(comm_.host.size()); }
  uint64_t count() const { return std::get<1>(GetParam()); }

  /// Runs `calls` (one per rank, nullopt for none) at once; returns their completions.
  std::vector<Completion> Run(const std::vector<std::optional<CallDescriptor>>& calls) {
    std::vector<std::future<Completion>> futures(size());
    for (uint32_t rank = 0; rank < size(); ++rank) {
      if (calls[rank])
        futures[rank] = Submit(*comm_.host[rank], *calls[rank], buffers_[rank].Views());
    }
    std::vector<Completion> completions(size());
    for (uint32_t rank = 0; rank < size(); ++rank) {
      if (calls[rank]) completions[rank] = Wait(futures[rank]);
      EXPECT_TRUE(completions[rank].status.ok())
          << "rank " << rank << ": " << completions[rank].status;
    }
    return completions;
  }

  template <typename T>
  void CheckAllreduce(DataType datatype, std::vector<T> (*make)(uint64_t, uint32_t)) {
    std::vector<std::optional<CallDescriptor>> calls;
    std::vector<T> expected(count(), T{});
    for (uint32_t rank = 0; rank < size(); ++rank) {
      const std::vector<T> input = make(count(), rank);
      for (uint64_t i = 0; i < count(); ++i) {
        // Integers wrap: sum in unsigned arithmetic, as the engine does.
        if constexpr (std::is_integral_v<T>) {
          expected[i] = T(uint32_t(expected[i]) + uint32_t(input[i]));
        } else {
          expected[i] += input[i];
        }
      }
      buffers_[rank].slots[0] = Bytes(input);
      buffers_[rank].slots[2].assign(count() * sizeof(T), std::byte{0x5A});
      CallDescriptor call = Describe(comm_, Collective::kAllreduce, rank, count(), datatype);
      call.algorithm = "ring";
      calls.push_back(call);
    }
    const std::vector<Completion> completions = Run(calls);
    for (uint32_t rank = 0; rank < size(); ++rank) {
      EXPECT_EQ(completions[rank].algorithm, "ring");
      EXPECT_TRUE(buffers_[rank].slots[2] == Bytes(expected)) << "rank " << rank;
    }
  }

  std::vector<DevicePtr> devices_;
  TestComm comm_;
  std::vector<RankBuffers> buffers_;
};

TEST_P(CollectiveTest, SendRecv) {
  const uint32_t last = size() - 1;
  std::vector<std::optional<CallDescriptor>> calls(size());
  CallDescriptor send = Describe(comm_, Collective::kSend, 0, count());
  send.peer = last;
  send.tag = 3;
  CallDescriptor recv = Describe(comm_, Collective::kRecv, last, count());
  recv.peer = 0;
  recv.tag = 3;
  calls[0] = send;
  calls[last] = recv;
  const std::vector<std::byte> data = Bytes(Floats(count(), 0));
  buffers_[0].slots[0] = data;
  buffers_[last].slots[2].resize(data.size());
  const std::vector<Completion> completions = Run(calls);
  EXPECT_EQ(completions[0].bytes_sent, data.size());
  EXPECT_TRUE(buffers_[last].slots[2] == data);
}

TEST_P(CollectiveTest, Bcast) {
  const uint32_t root = size() - 1;
  const std::vector<std::byte> data = Bytes(Floats(count(), 5));
  std::vector<std::optional<CallDescriptor>> calls;
  for (uint32_t rank = 0; rank < size(); ++rank) {
    CallDescriptor call = Describe(comm_, Collective::kBcast, rank, count());
    call.root = root;
    calls.push_back(call);
    buffers_[rank].slots[2] = rank == root ? data : std::vector<std::byte>(data.size());
  }
  Run(calls);
  for (uint32_t rank = 0; rank < size(); ++rank) {
    EXPECT_TRUE(buffers_[rank].slots[2] == data) << "rank " << rank;
  }
}

TEST_P(CollectiveTest, AllreduceFloat32Sum) { CheckAllreduce<float>(DataType::kFloat32, Floats); }

TEST_P(CollectiveTest, AllreduceInt32Sum) { CheckAllreduce<int32_t>(DataType::kInt32, Ints); }

INSTANTIATE_TEST_SUITE_P(All, CollectiveTest,
                         ::testing::Combine(::testing::ValuesIn(kTopologies),
                                            ::testing::ValuesIn(kCounts)),
                         [](const ::testing::TestParamInfo<std::tuple<Topology, uint64_t>>& info) {
                           return std::get<0>(info.param).name + "_Count" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace cclo::hw::emu::testing
