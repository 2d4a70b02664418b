// A peer engine played by a test over a blocking socket, to show a device handshakes and
// segments that a well-behaved engine would never send.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
  void SendSegment(poe::SegmentHeader header, const std::vector<std::byte>& payload);
  void SendControl(const poe::ControlMessage& message);
  /// Reads exactly `size` bytes; false on EOF or error.
  bool Read(void* data, size_t size);
  absl::StatusOr<poe::ControlMessage> ReadControl();
  /// Runs the connector's side up to and including RESPONSE; `secret` proves membership.
  void Authenticate(const CommSecret& secret);
  /// A data segment from the fake's rank 0 to the device's rank 1, tag 1.
  poe::SegmentHeader Data(uint64_t offset, uint64_t total, uint64_t sequence = 0) const;

 private:
  std::string device_address_;
  const TestComm& comm_;
  int fd_ = -1;
};

}  // namespace cclo::hw::emu::testing
