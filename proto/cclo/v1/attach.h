// The attach protocol, version 1: fixed-size frames on the Unix stream socket attach.sock.
//
//   client -> daemon  HELLO    (once, right after connect)
//   daemon -> client  WELCOME  (session id and token; the size of the rings' memfd, which
//                              comes with it by SCM_RIGHTS, followed by the command and
//                              completion doorbells: see cclo/v1/ring.h) or REFUSED
//                              (status code and reason), then
//   daemon -> client  BUFFER   (buffer id and size, with the buffer's memfd by SCM_RIGHTS),
//                              one per AllocBuffer, sent before the RPC answers.
//
// The connection lives as long as the session: when it closes, the daemon ends the session.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "hw/clock.h"

namespace cclo::attach {

inline constexpr uint32_t kMagic = 0x41434c43;  // "CLCA"
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kTextBytes = 232;

enum class FrameType : uint16_t {
  kHello = 1,
  kWelcome = 2,
  kRefused = 3,
  kBuffer = 4,
};

/// One decoded frame.
struct Frame {
  FrameType type = FrameType::kHello;
  uint64_t id = 0;     ///< WELCOME: session id; BUFFER: buffer id; REFUSED: status code
  uint64_t bytes = 0;  ///< BUFFER: buffer size; WELCOME: size of the rings' memfd
  std::string text;    ///< WELCOME: session token; REFUSED: reason
};

inline constexpr size_t kFrameBytes = 4 + 2 + 2 + 8 + 8 + kTextBytes;

/// Encodes a frame; text longer than kTextBytes - 1 is INVALID_ARGUMENT.
absl::StatusOr<std::array<uint8_t, kFrameBytes>> Encode(const Frame& frame);

/// Decodes and validates a frame: magic, version, type, NUL-terminated text.
absl::StatusOr<Frame> Decode(const uint8_t* data, size_t size);

/// Most fds one frame carries.
inline constexpr size_t kMaxFds = 3;

/// Sends one frame, with `fds` (at most kMaxFds) attached by SCM_RIGHTS.
absl::Status SendFrame(int socket_fd, const Frame& frame, absl::Span<const int> fds = {});

/// A received frame and the fds that came with it, in order (the caller owns them).
struct Received {
  Frame frame;
  int fd = -1;                ///< the first fd, -1 if none
  std::vector<int> more_fds;  ///< the others
};

/// Receives one whole frame, waiting at most until `deadline`. A closed peer is
/// UNAVAILABLE; an expired deadline DEADLINE_EXCEEDED; a malformed frame INVALID_ARGUMENT.
absl::StatusOr<Received> ReceiveFrame(int socket_fd, hw::SteadyTime deadline);

}  // namespace cclo::attach
