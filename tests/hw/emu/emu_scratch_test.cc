// Calls whose programs use scratch memory take it from the engine's ScratchPool: an
// in-place recursive doubling allreduce and an in-place linear alltoall of the same scratch
// size, run one after another across two EmuDevices, allocate one scratch buffer per
// device between them, and every result is right although each call starts on what the
// one before left in it.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

/// The scratch bytes `device` keeps once it has taken back the scratch of the calls that
/// completed: the engine does so just after their completions, so a look right after a
/// completion may be early. Polls for up to 10 s.
uint64_t KeptOnceDone(Device& device) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (device.Stats().scratch_bytes_kept < kScratchBytes && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return device.Stats().scratch_bytes_kept;
}

class ScratchTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(TestConfig()); }

  /// (Re)creates the two devices with `config` and their communicator.
  void Start(const EmuConfig& config) {
    devices_ = MakeDevices(2, config);
    ASSERT_EQ(devices_.size(), 2u);
    comm_ = MakeComm({devices_[0].get(), devices_[1].get()}, 47);
    ASSERT_TRUE(ConfigureAll(comm_).ok());
  }

  /// Runs a reduce all_to_one as the root of an 8-rank communicator on device 0 (the
  /// other ranks never call), over `bytes` of buffer at `memory`: the root needs 6 x
  /// `bytes` of scratch. Returns how it ended.
  Completion ReduceAllToOne(std::byte* memory, uint64_t bytes) {
    const TestComm wide = MakeComm(std::vector<Device*>(8, devices_[0].get()), 48);
    EXPECT_TRUE(ConfigureAll(wide).ok());
    CallDescriptor call = Describe(wide, Collective::kReduce, 0, bytes / sizeof(float));
    call.algorithm = "all_to_one";
    CallBuffers buffers;
    buffers.views[static_cast<size_t>(Slot::kOp0)] = {memory, bytes};
    buffers.views[static_cast<size_t>(Slot::kResult)] = buffers.views[0];
    std::future<Completion> future = Submit(*devices_[0], call, buffers);
    return Wait(future);
  }

  /// An in-place recursive doubling allreduce of kFloats (kScratchBytes of scratch on
  /// each rank) gives the right sums.
  void ExpectAllreduceRuns() {
    const auto results =
        RunInPlace(Collective::kAllreduce, "recursive_doubling", kFloats, kFloats, 0);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(results[rank] == Sum(Input(kFloats, 0, 0), Input(kFloats, 1, 0), 0, kFloats));
    }
  }

  /// Runs `collective` in place with `algorithm` on both ranks, `count` elements each, the
  /// result buffer holding `input_count` elements of input of `round`; returns the result
  /// buffers.
  std::vector<std::vector<std::byte>> RunInPlace(Collective collective, const char* algorithm,
                                                 uint64_t count, uint64_t input_count, int round) {
    RankBuffers buffers[2];
    std::future<Completion> futures[2];
    for (uint32_t rank = 0; rank < 2; ++rank) {
      buffers[rank].slots[2] = Input(input_count, rank, round);
      CallDescriptor call = Describe(comm_, collective, rank, count);
      call.algorithm = algorithm;
      call.in_place = true;
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
    // Each rank receives the other's whole buffer (kScratchBytes) into scratch: in place,
    // its own is being sent.
    const auto results =
        RunInPlace(Collective::kAllreduce, "recursive_doubling", kFloats, kFloats, round);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      EXPECT_TRUE(results[rank] ==
                  Sum(Input(kFloats, 0, round), Input(kFloats, 1, round), 0, kFloats))
          << "allreduce rank " << rank << ", round " << round;
    }
  }
  for (const DevicePtr& device : devices_) {
    EXPECT_EQ(device->Stats().scratch_allocations, 1u);
    EXPECT_EQ(KeptOnceDone(*device), kScratchBytes);
  }

  for (int round = 3; round < 6; ++round) {
    // Each rank sends from a copy of its whole buffer (kScratchBytes) in scratch, since its
    // chunks are overwritten by the other rank's as they arrive.
    const uint64_t chunk = kFloats / 2;
    const auto results = RunInPlace(Collective::kAlltoall, "linear", chunk, kFloats, round);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      for (uint32_t from = 0; from < 2; ++from) {
        const std::vector<std::byte> input = Input(kFloats, from, round);
        const size_t bytes = chunk * sizeof(float);
        EXPECT_TRUE(std::equal(input.begin() + rank * bytes, input.begin() + (rank + 1) * bytes,
                               results[rank].begin() + from * bytes))
            << "alltoall rank " << rank << ", chunk from " << from << ", round " << round;
      }
    }
  }
  for (const DevicePtr& device : devices_) {
    const DeviceStats stats = device->Stats();
    EXPECT_EQ(stats.scratch_allocations, 1u);
    EXPECT_EQ(KeptOnceDone(*device), kScratchBytes);
    EXPECT_EQ(stats.calls_failed, 0u);
  }
}

// A call whose scratch memory cannot be had fails with RESOURCE_EXHAUSTED naming its size,
// and the engine goes on serving: the root's scratch is here 6 x 32 TiB, more than a
// process can map (the engine's limit lifted out of the way). Its buffers are reserved
// address space only, which the failed call never touches.
TEST_F(ScratchTest, ScratchThatCannotBeHadFailsTheCall) {
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "ThreadSanitizer's shadow memory leaves no 32 TiB of address space to reserve";
#endif
  EmuConfig config = TestConfig();
  config.scratch_max_bytes = UINT64_MAX;
  Start(config);
  constexpr uint64_t kHugeBytes = uint64_t{1} << 45;
  void* const reserved =
      mmap(nullptr, kHugeBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(reserved, MAP_FAILED) << "cannot reserve " << kHugeBytes << " bytes of address space";
  const Completion done = ReduceAllToOne(static_cast<std::byte*>(reserved), kHugeBytes);
  EXPECT_EQ(done.status.code(), absl::StatusCode::kResourceExhausted) << done.status;
  EXPECT_NE(done.status.message().find("211106232532992 bytes of scratch"), std::string::npos)
      << done.status;
  EXPECT_NE(done.status.message().find("cannot allocate"), std::string::npos) << done.status;
  munmap(reserved, kHugeBytes);
  ExpectAllreduceRuns();
}

// The engine's running calls hold at most scratch_max_bytes of scratch: a call that needs
// more fails with RESOURCE_EXHAUSTED naming both, before it takes any, and a call that
// needs exactly the limit runs.
TEST_F(ScratchTest, ScratchOverTheEngineLimitFailsTheCall) {
  EmuConfig config = TestConfig();
  config.scratch_max_bytes = kScratchBytes;
  Start(config);
  std::vector<std::byte> buffer(kScratchBytes / 2);
  const Completion done = ReduceAllToOne(buffer.data(), buffer.size());
  EXPECT_EQ(done.status.code(), absl::StatusCode::kResourceExhausted) << done.status;
  EXPECT_NE(done.status.message().find(absl::StrCat(3 * kScratchBytes, " bytes of scratch")),
            std::string::npos)
      << done.status;
  EXPECT_NE(done.status.message().find(absl::StrCat("scratch_max_bytes = ", kScratchBytes)),
            std::string::npos)
      << done.status;
  const DeviceStats stats = devices_[0]->Stats();
  EXPECT_EQ(stats.scratch_bytes_limit, kScratchBytes);
  EXPECT_EQ(stats.scratch_bytes_used, 0u);
  EXPECT_EQ(stats.scratch_allocations, 0u);
  ExpectAllreduceRuns();
}

}  // namespace
}  // namespace cclo::hw::emu::testing
