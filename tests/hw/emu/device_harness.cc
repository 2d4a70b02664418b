#include "tests/hw/emu/device_harness.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "gtest/gtest.h"
#include "hw/clock.h"

namespace cclo::hw::emu::testing {

EmuConfig TestConfig() {
  EmuConfig config;
  config.segment_bytes = 64 << 10;
  config.rx_pool_bytes = 4 << 20;
  // Fake peers send no heartbeats, and tests read what the device sends: none comes.
  config.peer_timeout = absl::Minutes(10);
  return config;
}

std::vector<DevicePtr> MakeDevices(size_t count, const EmuConfig& config) {
  std::vector<DevicePtr> devices;
  for (size_t i = 0; i < count; ++i) {
    absl::StatusOr<DevicePtr> device = CreateEmuDevice(config);
    EXPECT_TRUE(device.ok()) << device.status();
    if (device.ok()) devices.push_back(*std::move(device));
  }
  return devices;
}

TestComm MakeComm(const std::vector<Device*>& host_by_rank, uint8_t seed) {
  TestComm comm;
  comm.host = host_by_rank;
  for (size_t i = 0; i < comm.config.id.size(); ++i) comm.config.id[i] = uint8_t(seed + i);
  for (size_t i = 0; i < comm.config.secret.size(); ++i) {
    comm.config.secret[i] = uint8_t(seed * 17 + i * 3);
  }
  for (Device* device : host_by_rank) comm.config.ranks.push_back({device->DataAddress()});
  return comm;
}

std::vector<absl::Status> Configure(
    const std::vector<std::pair<Device*, CommunicatorConfig>>& hosts, absl::Duration deadline) {
  for (const auto& [device, config] : hosts) {
    EXPECT_TRUE(device->PrepareCommunicator(config.id, config.secret).ok());
  }
  std::vector<std::future<absl::Status>> results;
  for (const auto& [device, config] : hosts) {
    auto promise = std::make_shared<std::promise<absl::Status>>();
    results.push_back(promise->get_future());
    device->ConfigureCommunicator(config, hw::SteadyNow() + deadline,
                                  [promise](absl::Status status) { promise->set_value(status); });
  }
  std::vector<absl::Status> statuses;
  for (auto& result : results) {
    if (result.wait_for(std::chrono::seconds(absl::ToInt64Seconds(kWait))) !=
        std::future_status::ready) {
      statuses.push_back(absl::InternalError("ConfigureCommunicator never answered"));
    } else {
      statuses.push_back(result.get());
    }
  }
  return statuses;
}

absl::Status ConfigureAll(const TestComm& comm) {
  std::vector<std::pair<Device*, CommunicatorConfig>> hosts;
  for (Device* device : comm.host) {
    if (std::none_of(hosts.begin(), hosts.end(),
                     [&](const auto& h) { return h.first == device; })) {
      hosts.push_back({device, comm.config});
    }
  }
  for (const absl::Status& status : Configure(hosts)) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

CallBuffers RankBuffers::Views() {
  CallBuffers buffers;
  for (int i = 0; i < kSlotCount; ++i) buffers.views[i] = {slots[i].data(), slots[i].size()};
  return buffers;
}

std::future<Completion> Submit(Device& device, const CallDescriptor& call, CallBuffers buffers,
                               absl::Duration deadline) {
  auto promise = std::make_shared<std::promise<Completion>>();
  std::future<Completion> future = promise->get_future();
  device.Call(call, std::move(buffers), hw::SteadyNow() + deadline,
              [promise](Completion completion) { promise->set_value(std::move(completion)); });
  return future;
}

Completion Wait(std::future<Completion>& future) {
  if (future.wait_for(std::chrono::seconds(absl::ToInt64Seconds(kWait))) !=
      std::future_status::ready) {
    return Completion{absl::InternalError("call never completed")};
  }
  return future.get();
}

CallDescriptor Describe(const TestComm& comm, Collective collective, uint32_t rank, uint64_t count,
                        DataType datatype) {
  CallDescriptor call;
  call.collective = collective;
  call.comm = comm.config.id;
  call.rank = rank;
  call.count = count;
  call.datatype = datatype;
  return call;
}

}  // namespace cclo::hw::emu::testing
