// ScratchPool: which buffers come back, which are kept, what is dropped for room, and what
// each tenant may hold.
#include "hw/emu/scratch_pool.h"

#include <map>
#include <utility>

#include "gtest/gtest.h"

namespace cclo::hw::emu {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kLimit = 64 * kMiB;

/// A buffer `pool` hands out to `tenant` (failing the test, and empty, if it refuses).
ScratchPool::Buffer Taken(ScratchPool& pool, uint64_t bytes, uint32_t tenant = 0) {
  absl::StatusOr<ScratchPool::Buffer> buffer = pool.Take(bytes, tenant);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return buffer.ok() ? *std::move(buffer) : ScratchPool::Buffer{};
}

TEST(ScratchPoolTest, HandsBackAKeptBufferThatFits) {
  ScratchPool pool(kLimit, 8 * kMiB);
  ScratchPool::Buffer first = Taken(pool, 2 * kMiB);
  ASSERT_NE(first.data, nullptr);
  EXPECT_EQ(first.bytes, 2 * kMiB);
  const std::byte* memory = first.data.get();
  pool.Give(std::move(first));
  EXPECT_EQ(pool.kept_bytes(), 2 * kMiB);
  // Smaller, but at least half of it: the same memory, whole.
  ScratchPool::Buffer again = Taken(pool, kMiB + 1);
  EXPECT_EQ(again.data.get(), memory);
  EXPECT_EQ(again.bytes, 2 * kMiB);
  EXPECT_EQ(pool.kept_bytes(), 0u);
  EXPECT_EQ(pool.allocations(), 1u);
}

TEST(ScratchPoolTest, MemoryThatCannotBeHadIsRefused) {
  ScratchPool pool(UINT64_MAX);
  // More than a 64-bit process can map: no exception, an error.
  const absl::StatusOr<ScratchPool::Buffer> none = pool.Take(uint64_t{1} << 62, 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(none.status().message(), "the engine cannot allocate that much memory");
  EXPECT_EQ(pool.allocations(), 0u);
  EXPECT_EQ(pool.used_bytes(), 0u);
}

TEST(ScratchPoolTest, HandsOutAtMostItsLimitAtOnce) {
  ScratchPool pool(8 * kMiB, 8 * kMiB);
  ScratchPool::Buffer three = Taken(pool, 3 * kMiB);
  ScratchPool::Buffer four = Taken(pool, 4 * kMiB);
  EXPECT_EQ(pool.used_bytes(), 7 * kMiB);
  const absl::StatusOr<ScratchPool::Buffer> over = pool.Take(kMiB + 1, 0);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "the engine's scratch in use would exceed scratch_max_bytes = 8388608 (7340032 "
            "bytes in use by other calls)");
  EXPECT_EQ(pool.allocations(), 2u);
  // Up to the limit exactly; and what comes back, kept or freed, makes room again.
  ScratchPool::Buffer one = Taken(pool, kMiB);
  EXPECT_EQ(pool.used_bytes(), 8 * kMiB);
  pool.Give(std::move(three));
  pool.Give(std::move(four));
  EXPECT_EQ(pool.used_bytes(), kMiB);
  EXPECT_EQ(pool.kept_bytes(), 7 * kMiB);
  ScratchPool::Buffer again = Taken(pool, 4 * kMiB);
  EXPECT_EQ(again.bytes, 4 * kMiB);
  EXPECT_EQ(pool.used_bytes(), 5 * kMiB);
}

// An operator's scratch_max_bytes bounds the scratch memory the engine has, kept or held.
TEST(ScratchPoolTest, KeptBuffersMakeRoomForNewOnesWithinTheLimit) {
  ScratchPool pool(12 * kMiB, 12 * kMiB);
  pool.Give(Taken(pool, 2 * kMiB));
  ScratchPool::Buffer three = Taken(pool, 3 * kMiB);
  const std::byte* three_memory = three.data.get();
  pool.Give(std::move(three));
  // 8 MiB fits neither kept buffer, and beside both the pool would have 13 MiB: the one
  // given back first goes.
  ScratchPool::Buffer eight = Taken(pool, 8 * kMiB);
  EXPECT_EQ(pool.used_bytes(), 8 * kMiB);
  EXPECT_EQ(pool.kept_bytes(), 3 * kMiB);
  ScratchPool::Buffer one = Taken(pool, kMiB);  // a new one: the kept 3 MiB is too big
  EXPECT_EQ(pool.used_bytes() + pool.kept_bytes(), 12 * kMiB);
  EXPECT_EQ(pool.Take(3 * kMiB + 1, 0).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Taken(pool, 3 * kMiB).data.get(), three_memory);
}

TEST(ScratchPoolTest, AllocatesWhenNoKeptBufferFits) {
  ScratchPool pool(kLimit, 16 * kMiB);
  pool.Give(Taken(pool, 4 * kMiB));
  // Too big, then less than half of it: new buffers, the kept one stays.
  ScratchPool::Buffer bigger = Taken(pool, 4 * kMiB + 1);
  ScratchPool::Buffer smaller = Taken(pool, 2 * kMiB - 1);
  EXPECT_EQ(bigger.bytes, 4 * kMiB + 1);
  EXPECT_EQ(smaller.bytes, 2 * kMiB - 1);
  EXPECT_EQ(pool.allocations(), 3u);
  EXPECT_EQ(pool.kept_bytes(), 4 * kMiB);
}

TEST(ScratchPoolTest, TakesTheSmallestThatFits) {
  ScratchPool pool(kLimit, 16 * kMiB);
  ScratchPool::Buffer three = Taken(pool, 3 * kMiB);
  ScratchPool::Buffer two = Taken(pool, 2 * kMiB);
  const std::byte* two_memory = two.data.get();
  pool.Give(std::move(three));
  pool.Give(std::move(two));
  EXPECT_EQ(Taken(pool, 2 * kMiB).data.get(), two_memory);
  EXPECT_EQ(pool.kept_bytes(), 3 * kMiB);
}

TEST(ScratchPoolTest, DropsTheLeastRecentlyGivenBackForRoom) {
  ScratchPool pool(kLimit, 5 * kMiB);
  ScratchPool::Buffer a = Taken(pool, 2 * kMiB);
  ScratchPool::Buffer b = Taken(pool, 2 * kMiB);
  ScratchPool::Buffer c = Taken(pool, 2 * kMiB);
  const std::byte* b_memory = b.data.get();
  const std::byte* c_memory = c.data.get();
  pool.Give(std::move(a));
  pool.Give(std::move(b));
  pool.Give(std::move(c));  // a goes
  EXPECT_EQ(pool.kept_bytes(), 4 * kMiB);
  ScratchPool::Buffer first = Taken(pool, 2 * kMiB);
  ScratchPool::Buffer second = Taken(pool, 2 * kMiB);
  EXPECT_TRUE((first.data.get() == b_memory && second.data.get() == c_memory) ||
              (first.data.get() == c_memory && second.data.get() == b_memory));
  EXPECT_EQ(pool.allocations(), 3u);
}

TEST(ScratchPoolTest, FreesSmallAndOversizedBuffers) {
  ScratchPool pool(kLimit, 4 * kMiB);
  pool.Give(Taken(pool, ScratchPool::kMinKeptBytes - 1));
  pool.Give(Taken(pool, 4 * kMiB + 8));
  pool.Give({});
  EXPECT_EQ(pool.kept_bytes(), 0u);
  pool.Give(Taken(pool, ScratchPool::kMinKeptBytes));
  EXPECT_EQ(pool.kept_bytes(), ScratchPool::kMinKeptBytes);
}

TEST(ScratchPoolTest, EachTenantIsHeldToItsOwnLimit) {
  ScratchPool pool(16 * kMiB, 8 * kMiB);
  pool.SetTenantLimits({{1, 4 * kMiB}});
  ScratchPool::Buffer three = Taken(pool, 3 * kMiB, 1);
  const absl::StatusOr<ScratchPool::Buffer> over = pool.Take(2 * kMiB, 1);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "this tenant's scratch in use would exceed its scratch_bytes quota = 4194304 "
            "(3145728 bytes in use by its other calls)");
  // Tenant 2 has only the pool's limit; tenant 1's refusal took nothing.
  ScratchPool::Buffer ten = Taken(pool, 10 * kMiB, 2);
  EXPECT_EQ(pool.used_bytes(), 13 * kMiB);
  std::map<uint32_t, TenantScratch> tenants = pool.tenants();
  EXPECT_EQ(tenants[1].used_bytes, 3 * kMiB);
  EXPECT_EQ(tenants[1].refusals, 1u);
  EXPECT_EQ(tenants[2].used_bytes, 10 * kMiB);
  EXPECT_EQ(tenants[2].refusals, 0u);

  // Up to its limit exactly; what it gives back is room again.
  ScratchPool::Buffer one = Taken(pool, kMiB, 1);
  pool.Give(std::move(three));
  EXPECT_EQ(pool.tenants()[1].used_bytes, kMiB);
  ScratchPool::Buffer again = Taken(pool, 3 * kMiB, 1);
  EXPECT_EQ(pool.tenants()[1].used_bytes, 4 * kMiB);
  pool.Give(std::move(ten));
  EXPECT_EQ(pool.tenants()[2].used_bytes, 0u);
}

TEST(ScratchPoolTest, AKeptBufferBeyondTheTenantsRoomIsLeft) {
  ScratchPool pool(16 * kMiB, 8 * kMiB);
  pool.SetTenantLimits({{1, 4 * kMiB}});
  pool.Give(Taken(pool, 2 * kMiB, 2));
  ScratchPool::Buffer three = Taken(pool, 3 * kMiB, 1);
  // The kept 2 MiB would fit 1 MiB but take tenant 1 past its limit: a new 1 MiB.
  ScratchPool::Buffer one = Taken(pool, kMiB, 1);
  EXPECT_EQ(one.bytes, kMiB);
  EXPECT_EQ(pool.kept_bytes(), 2 * kMiB);
  EXPECT_EQ(pool.tenants()[1].used_bytes, 4 * kMiB);
}

TEST(ScratchPoolTest, ALoweredTenantLimitRefusesUntilTheTenantIsBelowIt) {
  ScratchPool pool(16 * kMiB, 8 * kMiB);
  ScratchPool::Buffer three = Taken(pool, 3 * kMiB, 1);
  pool.SetTenantLimits({{1, 2 * kMiB}});
  EXPECT_EQ(pool.Take(1, 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool.tenants()[1].used_bytes, 3 * kMiB);
  pool.Give(std::move(three));
  ScratchPool::Buffer two = Taken(pool, 2 * kMiB, 1);
  EXPECT_EQ(pool.tenants()[1].used_bytes, 2 * kMiB);
  // Lifted again: only the pool's limit.
  pool.SetTenantLimits({});
  ScratchPool::Buffer more = Taken(pool, 10 * kMiB, 1);
  EXPECT_EQ(pool.tenants()[1].used_bytes, 12 * kMiB);
}

}  // namespace
}  // namespace cclo::hw::emu
