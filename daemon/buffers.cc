#include "daemon/buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cclo::daemon {

absl::StatusOr<std::shared_ptr<SharedBuffer>> SharedBuffer::Create(uint64_t id, uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("buffer size must be at least 1 byte");
  int fd = memfd_create(absl::StrCat("cclo-buffer-", id).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  auto fail = [fd, bytes](const char* what) {
    int error = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " for a buffer of ", bytes, " bytes: ", std::strerror(error)));
  };
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) return fail("ftruncate");
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return fail("sealing");
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return fail("mmap");
  return std::shared_ptr<SharedBuffer>(
      new SharedBuffer(id, bytes, fd, static_cast<std::byte*>(data)));
}

void SharedBuffer::CloseFd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

SharedBuffer::~SharedBuffer() {
  munmap(data_, bytes_);
  CloseFd();
}

}  // namespace cclo::daemon
