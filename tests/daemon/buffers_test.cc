#include "daemon/buffers.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace cclo::daemon {
namespace {

TEST(SharedBufferTest, IsMappedAndSharedThroughItsFd) {
  absl::StatusOr<SharedBufferPtr> buffer = SharedBuffer::Create(7, 8192);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ((*buffer)->id(), 7u);
  EXPECT_EQ((*buffer)->bytes(), 8192u);
  // A client maps the same fd and sees what the daemon writes.
  void* client = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, (*buffer)->fd(), 0);
  ASSERT_NE(client, MAP_FAILED);
  std::memcpy((*buffer)->data() + 100, "cclo", 4);
  EXPECT_EQ(std::memcmp(static_cast<char*>(client) + 100, "cclo", 4), 0);
  munmap(client, 8192);
}

TEST(SharedBufferTest, ClientCannotShrinkGrowOrUnseal) {
  absl::StatusOr<SharedBufferPtr> buffer = SharedBuffer::Create(1, 4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  int client_fd = dup((*buffer)->fd());  // what the client receives by SCM_RIGHTS
  ASSERT_GE(client_fd, 0);
  EXPECT_EQ(ftruncate(client_fd, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(ftruncate(client_fd, 1 << 20), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(fcntl(client_fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  EXPECT_EQ(errno, EPERM);
  int seals = fcntl(client_fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  // The daemon's mapping stays whole: touching the last byte does not fault.
  (*buffer)->data()[4095] = std::byte{1};
  close(client_fd);
}

TEST(SharedBufferTest, TheMappingOutlivesTheFd) {
  absl::StatusOr<SharedBufferPtr> buffer = SharedBuffer::Create(3, 4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  int client_fd = dup((*buffer)->fd());
  ASSERT_GE(client_fd, 0);
  (*buffer)->CloseFd();
  EXPECT_EQ((*buffer)->fd(), -1);
  void* client = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, client_fd, 0);
  ASSERT_NE(client, MAP_FAILED);
  std::memcpy((*buffer)->data() + 4092, "cclo", 4);
  EXPECT_EQ(std::memcmp(static_cast<char*>(client) + 4092, "cclo", 4), 0);
  munmap(client, 4096);
  close(client_fd);
}

TEST(SharedBufferTest, ZeroBytesIsRejected) {
  absl::StatusOr<SharedBufferPtr> buffer = SharedBuffer::Create(1, 0);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cclo::daemon
