#include "cclo/buffer.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cclo {

Buffer::Buffer(Buffer&& other) noexcept
    : id_(std::exchange(other.id_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      session_(std::move(other.session_)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Unmap();
    id_ = std::exchange(other.id_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    session_ = std::move(other.session_);
  }
  return *this;
}

Buffer::~Buffer() { Unmap(); }

void Buffer::Unmap() {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
}

absl::Status Buffer::CheckSession(const std::shared_ptr<client::Session>& session) const {
  // Compared by owner, so that a buffer whose session is gone is still not this one's.
  const auto same = [](const auto& a, const auto& b) {
    return !a.owner_before(b) && !b.owner_before(a);
  };
  if (same(session_, std::weak_ptr<client::Session>()) || same(session_, session)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("buffer ", id_, " belongs to another Client"));
}

absl::StatusOr<Buffer> Buffer::Map(uint64_t id, int fd, uint64_t bytes) {
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    return absl::InternalError(absl::StrCat("fstat of buffer ", id, ": ", std::strerror(errno)));
  }
  if (static_cast<uint64_t>(info.st_size) < bytes) {
    return absl::InternalError(
        absl::StrCat("buffer ", id, " file has ", info.st_size, " bytes, expected ", bytes));
  }
  if (bytes == 0) return Buffer(id, nullptr, 0);
  // A page of the memfd is charged to the memory cgroup of the process that first touches
  // it: faulting every page in here charges the buffer to this process, not to the daemon,
  // which would otherwise touch first what the app never wrote (a result's destination).
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (data == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of buffer ", id, " (", bytes, " bytes): ", std::strerror(errno)));
  }
  return Buffer(id, data, bytes);
}

}  // namespace cclo
