// ScratchPool: which buffers come back, which are kept, and what is dropped for room.
#include "hw/emu/scratch_pool.h"

#include <utility>

#include "gtest/gtest.h"

namespace cclo::hw::emu {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST(ScratchPoolTest, HandsBackAKeptBufferThatFits) {
  ScratchPool pool(8 * kMiB);
  ScratchPool::Buffer first = pool.Take(2 * kMiB);
  ASSERT_NE(first.data, nullptr);
  EXPECT_EQ(first.bytes, 2 * kMiB);
  const std::byte* memory = first.data.get();
  pool.Give(std::move(first));
  EXPECT_EQ(pool.kept_bytes(), 2 * kMiB);
  // Smaller, but at least half of it: the same memory, whole.
  ScratchPool::Buffer again = pool.Take(kMiB + 1);
  EXPECT_EQ(again.data.get(), memory);
  EXPECT_EQ(again.bytes, 2 * kMiB);
  EXPECT_EQ(pool.kept_bytes(), 0u);
  EXPECT_EQ(pool.allocations(), 1u);
}

TEST(ScratchPoolTest, MemoryThatCannotBeHadIsAnEmptyBuffer) {
  ScratchPool pool;
  // More than a 64-bit process can map: no exception, an empty buffer.
  const ScratchPool::Buffer none = pool.Take(uint64_t{1} << 62);
  EXPECT_EQ(none.data, nullptr);
  EXPECT_EQ(none.bytes, 0u);
  EXPECT_EQ(pool.allocations(), 0u);
}

TEST(ScratchPoolTest, AllocatesWhenNoKeptBufferFits) {
  ScratchPool pool(16 * kMiB);
  pool.Give(pool.Take(4 * kMiB));
  // Too big, then less than half of it: new buffers, the kept one stays.
  ScratchPool::Buffer bigger = pool.Take(4 * kMiB + 1);
  ScratchPool::Buffer smaller = pool.Take(2 * kMiB - 1);
  EXPECT_EQ(bigger.bytes, 4 * kMiB + 1);
  EXPECT_EQ(smaller.bytes, 2 * kMiB - 1);
  EXPECT_EQ(pool.allocations(), 3u);
  EXPECT_EQ(pool.kept_bytes(), 4 * kMiB);
}

TEST(ScratchPoolTest, TakesTheSmallestThatFits) {
  ScratchPool pool(16 * kMiB);
  ScratchPool::Buffer three = pool.Take(3 * kMiB);
  ScratchPool::Buffer two = pool.Take(2 * kMiB);
  const std::byte* two_memory = two.data.get();
  pool.Give(std::move(three));
  pool.Give(std::move(two));
  EXPECT_EQ(pool.Take(2 * kMiB).data.get(), two_memory);
  EXPECT_EQ(pool.kept_bytes(), 3 * kMiB);
}

TEST(ScratchPoolTest, DropsTheLeastRecentlyGivenBackForRoom) {
  ScratchPool pool(5 * kMiB);
  ScratchPool::Buffer a = pool.Take(2 * kMiB);
  ScratchPool::Buffer b = pool.Take(2 * kMiB);
  ScratchPool::Buffer c = pool.Take(2 * kMiB);
  const std::byte* b_memory = b.data.get();
  const std::byte* c_memory = c.data.get();
  pool.Give(std::move(a));
  pool.Give(std::move(b));
  pool.Give(std::move(c));  // a goes
  EXPECT_EQ(pool.kept_bytes(), 4 * kMiB);
  ScratchPool::Buffer first = pool.Take(2 * kMiB);
  ScratchPool::Buffer second = pool.Take(2 * kMiB);
  EXPECT_TRUE((first.data.get() == b_memory && second.data.get() == c_memory) ||
              (first.data.get() == c_memory && second.data.get() == b_memory));
  EXPECT_EQ(pool.allocations(), 3u);
}

TEST(ScratchPoolTest, FreesSmallAndOversizedBuffers) {
  ScratchPool pool(4 * kMiB);
  pool.Give(pool.Take(ScratchPool::kMinKeptBytes - 1));
  pool.Give(pool.Take(4 * kMiB + 8));
  pool.Give({});
  EXPECT_EQ(pool.kept_bytes(), 0u);
  pool.Give(pool.Take(ScratchPool::kMinKeptBytes));
  EXPECT_EQ(pool.kept_bytes(), ScratchPool::kMinKeptBytes);
}

}  // namespace
}  // namespace cclo::hw::emu
