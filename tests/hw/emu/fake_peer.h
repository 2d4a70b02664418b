// A peer engine played by a test over a blocking socket, to show a device handshakes and
// segments that a well-behaved engine would never send; and a fixture that connects one
// to a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "hw/poe/handshake.h"
#include "hw/poe/wire.h"
#include "tests/hw/emu/device_harness.h"

namespace cclo::hw::emu::testing {

/// Smaller than any "127.0.0.1:<port>" a device gets, so the fake peer connects.
inline constexpr char kFakeAddress[] = "127.0.0.1:1";

class FakePeer {
 public:
  /// Connects to the device at `device_address`; `comm` must outlive the peer.
  FakePeer(const std::string& device_address, const TestComm& comm);
  ~FakePeer();

  /// Closes the socket (end of stream, no BYE unless sent before).
  void Hangup();
  void Write(const void* data, size_t size);
  /// Sends `header` (its length set to the payload's) and `payload`.
  void SendSegment(poe::SegmentHeader header, const std::vector<std::byte>& payload = {});
  void SendControl(const poe::ControlMessage& message);
  /// Grants the device `credits` eager credits.
  void Grant(uint64_t credits);
  /// Reads exactly `size` bytes; false on EOF or error.
  bool Read(void* data, size_t size);
  /// Reads the next segment; its payload goes to `payload` when given.
  absl::StatusOr<poe::SegmentHeader> ReadSegment(std::vector<std::byte>* payload = nullptr);
  /// Reads segments up to the next one of `type`, adding up the credits granted on the way.
  absl::StatusOr<poe::SegmentHeader> ReadUntil(poe::SegmentType type);
  /// Reads the next control message, past any credit segments.
  absl::StatusOr<poe::ControlMessage> ReadControl();
  /// Runs the connector's side up to and including RESPONSE; `secret` proves membership.
  void Authenticate(const CommSecret& secret);
  /// A segment of a message from the fake's rank 0 to the device's rank 1, tag 1.
  poe::SegmentHeader Message(poe::SegmentType type, uint64_t total, uint64_t sequence = 0,
                             uint64_t offset = 0) const;
  /// Eager credits the device granted so far (seen by ReadSegment).
  uint64_t credits() const { return credits_; }

 private:
  std::string device_address_;
  const TestComm& comm_;
  int fd_ = -1;
  uint64_t credits_ = 0;
};

/// A device whose communicator has rank 0 at a fake peer and rank 1 on the device.
class FakePeerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(TestConfig()); }

  /// (Re)creates the device with `config`.
  void Start(const EmuConfig& config);

  /// Configures the device, completes the fake's handshake, reads the device's credit
  /// grant and grants it `credits` in return: the communicator is then ready.
  void Connect(FakePeer& peer, uint64_t credits = 0);

  /// Posts a receive of `bytes` at rank 1 from the fake's rank 0 (tag 1).
  std::future<Completion> PostRecv(RankBuffers& buffers, uint64_t bytes);

  std::vector<DevicePtr> devices_;
  Device* device_ = nullptr;
  TestComm comm_;
};

/// `count` bytes of a pattern that depends on `seed`.
std::vector<std::byte> Pattern(size_t count, int seed);

}  // namespace cclo::hw::emu::testing
