// Calls whose programs use scratch memory take it from the engine's ScratchPool: a reduce
// all_to_one and an in-place recursive doubling allreduce of the same scratch size, run one
// after another across two EmuDevices, allocate one scratch buffer per device between
// them, and every result is right although each call starts on what the one before left
// in it.
#include <cstring>
#include <future>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hw/emu/scratch_pool.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {
namespace {

constexpr uint64_t kScratchBytes = 2 * ScratchPool::kMinKeptBytes;
constexpr uint64_t kFloats = kScratchBytes / sizeof(float);

/// Small integers as floats: every sum is exact.
std::vector<std::byte> Input(uint64_t count, uint32_t rank, int round) {
  std::vector<float> values(count);
  for (uint64_t i = 0; i < count; ++i) values[i] = float((i * 7 + rank * 13 + round) % 101);
  std::vector<std::byte> bytes(count * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// The elementwise float sum of the two ranks' inputs from `offset`, `count` of them.
std::vector<std::byte> Sum(const std::vector<std::byte>& a, const std::vector<std::byte>& b,
                           uint64_t offset, uint64_t count) {
  std::vector<float> x(count), y(count);
  std::memcpy(x.data(), a.data() + offset * sizeof(float), count * sizeof(float));
  std::memcpy(y.data(), b.data() + offset * sizeof(float), count * sizeof(float));
  for (uint64_t i = 0; i < count; ++i) x[i] += y[i];
  std::vector<std::byte> bytes(count * sizeof(float));
  std::memcpy(bytes.data(), x.data(), bytes.size());
  return bytes;
}

class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = MakeDevices(2);
    ASSERT_EQ(devices_.size(), 2u);
    comm_ = MakeComm({devices_[0].get(), devices_[1].get()}, 47);
    ASSERT_TRUE(ConfigureAll(comm_).ok());
  }

  /// Runs `collective` with `algorithm` on both ranks, `count` elements each, inputs of
  /// `round` (in the result buffer when `in_place`); returns the result buffers.
  std::vector<std::vector<std::byte>> Run(Collective collective, const char* algorithm,
                                          uint64_t count, int round, bool in_place) {
    RankBuffers buffers[2];
    std::future<Completion> futures[2];
    for (uint32_t rank = 0; rank < 2; ++rank) {
      if (in_place) {
        buffers[rank].slots[2] = Input(count, rank, round);
      } else {
        buffers[rank].slots[0] = Input(count, rank, round);
        buffers[rank].slots[2].assign(count * sizeof(float), std::byte{0x5A});
      }
      CallDescriptor call = Describe(comm_, collective, rank, count);
      call.algorithm = algorithm;
      call.in_place = in_place;
      futures[rank] = Submit(*comm_.host[rank], call, buffers[rank].Views());
    }
    std::vector<std::vector<std::byte>> results;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      const Completion done = Wait(futures[rank]);
      EXPECT_TRUE(done.status.ok()) << "rank " << rank << ": " << done.status;
      EXPECT_EQ(done.algorithm, algorithm);
      results.push_back(std::move(buffers[rank].slots[2]));
    }
    return results;
  }

  std::vector<DevicePtr> devices_;
  TestComm comm_;
};

TEST_F(ScratchTest, CallsOfOneScratchSizeReuseOneBuffer) {
  for (int round = 0; round < 3; ++round) {
    // The root (rank 0) receives rank 1's input into kScratchBytes of scratch.
    const auto results = Run(Collective::kReduce, "all_to_one", kFloats, round, false);
    EXPECT_TRUE(results[0] == Sum(Input(kFloats, 0, round), Input(kFloats, 1, round), 0, kFloats))
        << "reduce, round " << round;
  }
  const DeviceStats root = devices_[0]->Stats();
  EXPECT_EQ(root.scratch_allocations, 1u);
  EXPECT_EQ(root.scratch_bytes_kept, kScratchBytes);
  EXPECT_EQ(devices_[1]->Stats().scratch_allocations, 0u);  // a sender needs none

  for (int round = 3; round < 6; ++round) {
    // Each rank receives the other's whole buffer (kScratchBytes) into scratch: in place,
    // its own is being sent.
    const auto results = Run(Collective::kAllreduce, "recursive_doubling", kFloats, round, true);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(results[rank] ==
                  Sum(Input(kFloats, 0, round), Input(kFloats, 1, round), 0, kFloats))
          << "allreduce rank " << rank << ", round " << round;
    }
  }
  for (const DevicePtr& device : devices_) {
    const DeviceStats stats = device->Stats();
    EXPECT_EQ(stats.scratch_allocations, 1u);
    EXPECT_EQ(stats.scratch_bytes_kept, kScratchBytes);
    EXPECT_EQ(stats.calls_failed, 0u);
  }
}

}  // namespace
}  // namespace cclo::hw::emu::testing
