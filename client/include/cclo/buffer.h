// A shared-memory buffer allocated by cclod and mapped into this process.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"

namespace cclo {

/// A daemon-allocated buffer, mapped read/write and shared with cclod (no copies on ops).
///
/// Move-only. Destruction unmaps the buffer in this process only; the daemon keeps its side
/// until Client::FreeBuffer or until the session ends. Ops refer to the buffer by id(), so a
/// buffer must stay alive until every op using it has finished.
class Buffer {
 public:
  /// An empty buffer (id 0, no memory); what a moved-from buffer becomes.
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  /// Maps `bytes` bytes of the memfd `fd` shared read/write. Does not take `fd`; the
  /// caller closes it. Fails when the file is shorter than `bytes`.
  static absl::StatusOr<Buffer> Map(uint64_t id, int fd, uint64_t bytes);

  /// The daemon's id for this buffer; 0 for an empty buffer.
  uint64_t id() const { return id_; }
  /// Start of the mapping; nullptr for an empty buffer.
  void* data() { return data_; }
  const void* data() const { return data_; }
  /// Size of the mapping in bytes.
  uint64_t size() const { return size_; }

  /// The whole buffer as elements of T (size() / sizeof(T) of them).
  template <typename T>
  std::span<T> span() {
    return {static_cast<T*>(data_), static_cast<size_t>(size_ / sizeof(T))};
  }
  template <typename T>
  std::span<const T> span() const {
    return {static_cast<const T*>(data_), static_cast<size_t>(size_ / sizeof(T))};
  }

 private:
  Buffer(uint64_t id, void* data, uint64_t size) : id_(id), data_(data), size_(size) {}
  void Unmap();

  uint64_t id_ = 0;
  void* data_ = nullptr;  // owned mapping of size_ bytes
  uint64_t size_ = 0;
};

}  // namespace cclo
