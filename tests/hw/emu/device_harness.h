// Test helpers for EmuDevice: devices on 127.0.0.1 port 0, communicators spread over
// them, and calls awaited through futures (waits, never sleeps).
#pragma once

#include <array>
#include <cstddef>
#include <future>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "hw/device.h"
#include "hw/emu/emu_device.h"

namespace cclo::hw::emu::testing {

/// Generous bound on any single wait; a test that hits it fails instead of hanging.
inline constexpr absl::Duration kWait = absl::Seconds(60);

/// Small segments (64 KiB) so that modest counts span several of them.
EmuConfig TestConfig();

/// Creates `count` devices with `config`.
std::vector<DevicePtr> MakeDevices(size_t count, const EmuConfig& config = TestConfig());

/// A communicator and the device hosting each of its ranks.
struct TestComm {
  CommunicatorConfig config;
  std::vector<Device*> host;  ///< by rank
};

/// A communicator whose rank r lives on host_by_rank[r]; `seed` makes id and secret.
TestComm MakeComm(const std::vector<Device*>& host_by_rank, uint8_t seed);

/// Prepares then configures the communicator on every distinct host (each with its own
/// copy of config, so tests may alter one); returns each host's result in host order.
std::vector<absl::Status> Configure(
    const std::vector<std::pair<Device*, CommunicatorConfig>>& hosts,
    absl::Duration deadline = kWait);

/// Configure() on every host of `comm` with the same config; OK if all succeeded.
absl::Status ConfigureAll(const TestComm& comm);

/// A call's three buffers, owned by the test.
struct RankBuffers {
  std::array<std::vector<std::byte>, kSlotCount> slots;
  CallBuffers Views();
};

/// Submits a call; the future yields its completion.
std::future<Completion> Submit(Device& device, const CallDescriptor& call, CallBuffers buffers,
                               absl::Duration deadline = kWait);

/// Waits up to kWait; a missing completion becomes an INTERNAL status.
Completion Wait(std::future<Completion>& future);

/// A call descriptor for `comm` at `rank`.
CallDescriptor Describe(const TestComm& comm, Collective collective, uint32_t rank, uint64_t count,
                        DataType datatype = DataType::kFloat32);

}  // namespace cclo::hw::emu::testing
