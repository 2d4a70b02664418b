// Shared-memory buffers: sealed memfds mapped in the daemon and handed to clients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace cclo::daemon {

/// One sealed memfd and the daemon's mapping of it. The seals (no shrink, no grow, no
/// more seals) mean no client can make the daemon's accesses fault.
class SharedBuffer {
 public:
  /// Creates a memfd of `bytes`, seals it and maps it.
  static absl::StatusOr<std::shared_ptr<SharedBuffer>> Create(uint64_t id, uint64_t bytes);
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  uint64_t id() const { return id_; }
  uint64_t bytes() const { return bytes_; }
  std::byte* data() const { return data_; }
  /// The memfd, to send to the client; owned by this object; -1 after CloseFd.
  int fd() const { return fd_; }
  /// Closes the memfd once it was sent: the mapping stays, and a daemon holding many
  /// buffers does not run out of file descriptors.
  void CloseFd();

 private:
  SharedBuffer(uint64_t id, uint64_t bytes, int fd, std::byte* data)
      : id_(id), bytes_(bytes), fd_(fd), data_(data) {}

  const uint64_t id_;
  const uint64_t bytes_;
  int fd_;
  std::byte* const data_;
};

using SharedBufferPtr = std::shared_ptr<SharedBuffer>;

}  // namespace cclo::daemon
