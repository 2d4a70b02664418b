// A shared-memory buffer allocated by cclod and mapped into this process.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"

namespace cclo {
namespace client {
class Session;
}

/// A daemon-allocated buffer, mapped read/write and shared with cclod (no copies on ops).
///
/// Move-only. Destruction unmaps the buffer in this process only; the daemon keeps its side
/// until Client::FreeBuffer or until the session ends. Ops refer to the buffer by id(), so a
/// buffer must stay alive until every op using it has finished. It belongs to the Client that
/// allocated it: another Client's ops and FreeBuffer refuse it (INVALID_ARGUMENT), as its id
/// may name another buffer there (a Client of another daemon, or of a restarted one).
class Buffer {
 public:
  /// An empty buffer (id 0, no memory); what a moved-from buffer becomes.
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  /// Maps `bytes` bytes of the memfd `fd` shared read/write, its pages faulted in, so that
  /// they are charged to this process's memory cgroup. Does not take `fd`; the caller
  /// closes it. Fails when the file is shorter than `bytes`. The buffer belongs to
  /// no Client: every Client's ops and FreeBuffer take it as naming daemon buffer `id`.
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

  /// What libcclo checks before an op or FreeBuffer of `session` names the buffer: OK when
  /// it was allocated there or belongs to no Client (Map); INVALID_ARGUMENT "buffer <id>
  /// belongs to another Client" otherwise.
  absl::Status CheckSession(const std::shared_ptr<client::Session>& session) const;

 private:
  friend class Client;  // sets session_ on the buffers it allocates
  Buffer(uint64_t id, void* data, uint64_t size) : id_(id), data_(data), size_(size) {}
  void Unmap();

  uint64_t id_ = 0;
  void* data_ = nullptr;  // owned mapping of size_ bytes
  uint64_t size_ = 0;
  std::weak_ptr<client::Session> session_;  // the one that allocated it; none for Map's
};

}  // namespace cclo
