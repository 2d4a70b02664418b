// A peer engine played by a test over blocking sockets, to show a device handshakes and
// segments that a well-behaved engine would never send; and a fixture that connects one
// to a device. As a real engine, the fake sends on the session it opened to the device and
// receives on the one the device opens to it.
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

/// The address a fake peer announces when its communicator has no rank table.
inline constexpr char kFakeAddress[] = "127.0.0.1:1";

class FakePeer {
 public:
  /// Connects to the device at `device_address` as the engine of `comm`'s rank 0 (its
  /// data address; kFakeAddress without a rank table); `comm` must outlive the peer.
  FakePeer(const std::string& device_address, const TestComm& comm);
  ~FakePeer();

  /// Closes both sockets (end of stream, no BYE unless sent before).
  void Hangup();
  /// Closes the socket of the session the device opened alone (end of stream, no BYE).
  void HangupBack();
  /// Ends the session the device opened (end of stream, no BYE) and waits, bounded, until
  /// the device has closed its end too; false if it did not.
  bool EndBack();
  /// Waits, bounded, until the device has read everything the fake sent on its session
  /// (nothing unread at the device's end, per /proc/net/tcp); false if it did not.
  bool WaitUntilRead();
  /// Writes on the session the fake opened.
  void Write(const void* data, size_t size);
  /// Sends `header` (its length set to the payload's) and `payload` on the fake's session.
  void SendSegment(poe::SegmentHeader header, const std::vector<std::byte>& payload = {});
  /// The same on the session the device opened, which carries only what the device sends.
  void SendBack(poe::SegmentHeader header, const std::vector<std::byte>& payload = {});
  void SendControl(const poe::ControlMessage& message);
  /// Says BYE with `reason` on the device's session, then on the fake's; `kind` says
  /// whether its ranks left or it broke the communicator.
  void Bye(const std::string& reason, poe::ByeKind kind = poe::ByeKind::kLeft);
  /// Grants the device `credits` eager credits.
  void Grant(uint64_t credits);
  /// Reads exactly `size` bytes from the device: on the session the device opened once
  /// accepted (AcceptDevice), before that on the fake's; false on EOF or error.
  bool Read(void* data, size_t size);
  /// Reads the next segment past any heartbeats (counted); its payload goes to `payload`
  /// when given.
  absl::StatusOr<poe::SegmentHeader> ReadSegment(std::vector<std::byte>* payload = nullptr);
  /// Reads segments up to the next one of `type`, adding up the credits granted on the way.
  absl::StatusOr<poe::SegmentHeader> ReadUntil(poe::SegmentType type);
  /// Reads the next control message, past any credit segments.
  absl::StatusOr<poe::ControlMessage> ReadControl();
  /// Runs the connector's side up to and including RESPONSE; `secret` proves membership.
  /// The fake announces `timeout_ms` as its peer timeout (by default the longest, so the
  /// device's applies).
  void Authenticate(const CommSecret& secret, uint64_t timeout_ms = poe::kMaxPeerTimeoutMs);
  /// Accepts the session the device opens to the fake on `listener` and runs the
  /// acceptor's side of its handshake up to and including ACCEPT.
  void AcceptDevice(int listener);
  /// Accepts the device's session on `listener`, reads its HELLO and answers with a
  /// CHALLENGE announcing 64 KiB segments; its proof covers `proved_segment_bytes`
  /// instead (another size stands for a CHALLENGE changed on the way).
  void AnswerHello(int listener, uint64_t proved_segment_bytes = 64 << 10);
  /// A segment of a message from the fake's rank 0 to the device's rank 1, tag 1.
  poe::SegmentHeader Message(poe::SegmentType type, uint64_t total, uint64_t sequence = 0,
                             uint64_t offset = 0) const;
  /// Eager credits the device granted so far (seen by ReadSegment).
  uint64_t credits() const { return credits_; }
  /// Heartbeats the device sent so far (seen and skipped by ReadSegment).
  uint64_t heartbeats() const { return heartbeats_; }
  /// The data address the fake announces.
  const std::string& address() const { return address_; }

 private:
  void WriteOn(int fd, const void* data, size_t size);
  void SendOn(int fd, poe::SegmentHeader header, const std::vector<std::byte>& payload);
  void SendControlOn(int fd, const poe::ControlMessage& message);

  std::string device_address_;
  const TestComm& comm_;
  std::string address_;
  int out_fd_ = -1;  ///< the session the fake opened
  int in_fd_ = -1;   ///< the session the device opened; -1 until accepted
  uint64_t credits_ = 0;
  uint64_t heartbeats_ = 0;
  poe::ControlMessage hello_;      ///< the device's HELLO (AnswerHello)
  poe::ControlMessage challenge_;  ///< the fake's CHALLENGE, without its proof
};

/// A device whose communicator has rank 0 at a fake peer and rank 1 on the device.
class FakePeerTest : public ::testing::Test {
 protected:
  ~FakePeerTest() override;
  void SetUp() override { Start(TestConfig()); }

  /// (Re)creates the device with `config`.
  void Start(const EmuConfig& config);

  /// Configures the device's communicator; the future yields the configure's result.
  std::future<absl::Status> Configure();

  /// Configures the device and runs the fake's handshake up to the device's ACCEPT; the
  /// future yields the configure's result.
  std::future<absl::Status> Admit(FakePeer& peer);

  /// Admit(), then grants the device `credits` (before the device's own session is up, as
  /// a peer's grant may come), answers the device's handshake and reads its credit grant:
  /// the communicator is then ready.
  void Connect(FakePeer& peer, uint64_t credits = 0);

  /// Posts a receive of `bytes` at rank 1 from the fake's rank 0 (tag 1).
  std::future<Completion> PostRecv(RankBuffers& buffers, uint64_t bytes);

  std::vector<DevicePtr> devices_;
  Device* device_ = nullptr;
  TestComm comm_;      ///< rank 0 at the fake (listener_'s address), rank 1 on the device
  int listener_ = -1;  ///< where the fake accepts the device's session
  std::string fake_address_;
};

/// `count` bytes of a pattern that depends on `seed`.
std::vector<std::byte> Pattern(size_t count, int seed);

}  // namespace cclo::hw::emu::testing
