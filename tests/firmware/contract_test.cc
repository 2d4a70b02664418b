#include "firmware/contract.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Collective;
using hw::Slot;

struct Expected {
  uint64_t op0;
  uint64_t result;
};

Expected Sizes(Collective collective, uint32_t rank, uint32_t root, bool in_place,
               uint64_t count, uint32_t world_size) {
  hw::CallDescriptor call;
  call.collective = collective;
  call.rank = rank;
  call.root = root;
  call.in_place = in_place;
  call.count = count;
  EXPECT_EQ(RequiredElements(call, world_size, Slot::kOp1), 0u);
  EXPECT_EQ(RequiredElements(call, world_size, Slot::kScratch), 0u);
  return {RequiredElements(call, world_size, Slot::kOp0),
          RequiredElements(call, world_size, Slot::kResult)};
}

void ExpectSizes(Collective collective, uint32_t rank, uint32_t root, bool in_place,
                 Expected expected) {
  const Expected got = Sizes(collective, rank, root, in_place, 9, 4);
  EXPECT_EQ(got.op0, expected.op0) << hw::CollectiveName(collective) << " rank " << rank;
  EXPECT_EQ(got.result, expected.result) << hw::CollectiveName(collective) << " rank " << rank;
}

TEST(ContractTest, ElementsPerSlot) {
  // 4 ranks, count 9, root 2; the caller is rank 2 (the root) or rank 1.
  ExpectSizes(Collective::kSend, 1, 2, false, {9, 0});
  ExpectSizes(Collective::kRecv, 1, 2, false, {0, 9});
  ExpectSizes(Collective::kBcast, 1, 2, false, {0, 9});
  ExpectSizes(Collective::kBcast, 2, 2, false, {0, 9});
  ExpectSizes(Collective::kScatter, 2, 2, false, {36, 9});
  ExpectSizes(Collective::kScatter, 1, 2, false, {0, 9});
  ExpectSizes(Collective::kGather, 2, 2, false, {9, 36});
  ExpectSizes(Collective::kGather, 1, 2, false, {9, 0});
  ExpectSizes(Collective::kAllgather, 1, 2, false, {9, 36});
  ExpectSizes(Collective::kReduce, 2, 2, false, {9, 9});
  ExpectSizes(Collective::kReduce, 1, 2, false, {9, 0});
  ExpectSizes(Collective::kAllreduce, 1, 2, false, {9, 9});
  ExpectSizes(Collective::kReduceScatter, 1, 2, false, {36, 9});
  ExpectSizes(Collective::kAlltoall, 1, 2, false, {36, 36});
  ExpectSizes(Collective::kBarrier, 1, 2, false, {0, 0});
  ExpectSizes(Collective::kNop, 1, 2, false, {0, 0});
}

TEST(ContractTest, InPlaceReadsTheResultBuffer) {
  ExpectSizes(Collective::kScatter, 2, 2, true, {0, 36});
  ExpectSizes(Collective::kGather, 2, 2, true, {0, 36});
  ExpectSizes(Collective::kAllgather, 1, 2, true, {0, 36});
  ExpectSizes(Collective::kReduce, 2, 2, true, {0, 9});
  ExpectSizes(Collective::kAllreduce, 1, 2, true, {0, 9});
  ExpectSizes(Collective::kReduceScatter, 1, 2, true, {0, 36});
  ExpectSizes(Collective::kAlltoall, 1, 2, true, {0, 36});
}

TEST(ContractTest, CountZeroNeedsNothingAndHugeCountsSaturate) {
  const Expected zero = Sizes(Collective::kAlltoall, 0, 0, false, 0, 13);
  EXPECT_EQ(zero.op0, 0u);
  EXPECT_EQ(zero.result, 0u);
  const Expected huge = Sizes(Collective::kAllgather, 0, 0, false, UINT64_MAX / 2, 3);
  EXPECT_EQ(huge.result, UINT64_MAX);
}

TEST(ContractTest, RequiredBytesCountsTheChunksApart) {
  hw::CallDescriptor call;
  call.collective = Collective::kAlltoall;
  call.datatype = hw::DataType::kInt32;
  call.count = UINT64_MAX / 12;  // the largest whose 3 chunks fit
  absl::StatusOr<uint64_t> bytes = RequiredBytes(call, 3, Slot::kResult);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, call.count * 12);
  EXPECT_EQ(RequiredBytes(call, 3, Slot::kOp1), absl::StatusOr<uint64_t>(0));
  call.count = uint64_t{1} << 62;  // fits one chunk, not 3
  EXPECT_EQ(RequiredBytes(call, 3, Slot::kOp0).status(),
            absl::InvalidArgumentError(
                "count 4611686018427387904 of int32 times 3 ranks overflows a byte length"));
  call.collective = Collective::kAllreduce;
  EXPECT_EQ(
      RequiredBytes(call, 3, Slot::kResult).status(),
      absl::InvalidArgumentError("count 4611686018427387904 of int32 overflows a byte length"));
  call.count = 0;
  EXPECT_EQ(RequiredBytes(call, 3, Slot::kResult), absl::StatusOr<uint64_t>(0));
}

// The daemon sizes an op's messages as count x element once RequiredBytes took both of its
// buffers: every call that moves data needs at least count elements in one of them.
TEST(ContractTest, EveryCallWithDataHoldsItsCountInABuffer) {
  for (int value = 0; value <= static_cast<int>(hw::kLastCollective); ++value) {
    const auto collective = static_cast<Collective>(value);
    if (collective == Collective::kBarrier || collective == Collective::kNop) continue;
    for (uint32_t rank : {0u, 1u}) {
      for (bool in_place : {false, true}) {
        const Expected got = Sizes(collective, rank, 0, in_place, 9, 4);
        EXPECT_GE(std::max(got.op0, got.result), 9u)
            << hw::CollectiveName(collective) << " rank " << rank << " in place " << in_place;
      }
    }
  }
}

TEST(ContractTest, UnknownCollectiveNeedsNothing) {
  const Expected got = Sizes(static_cast<Collective>(200), 0, 0, false, 9, 4);
  EXPECT_EQ(got.op0, 0u);
  EXPECT_EQ(got.result, 0u);
}

}  // namespace
}  // namespace cclo::firmware
