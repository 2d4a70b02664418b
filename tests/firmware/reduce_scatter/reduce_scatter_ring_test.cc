#include "firmware/reduce_scatter/reduce_scatter_ring.h"

#include <cstring>

#include "firmware/patterns/ring.h"
#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

// Rank r holds result[i] = 1000 r + i; afterwards chunk r of rank r holds the sum over ranks.
TEST(ReduceScatterRingTest, ChunkRHoldsTheFullSumAtRankR) {
  for (uint32_t world_size : {1u, 2u, 3u, 5u, 8u, 13u}) {
    for (uint64_t count : {0u, 1u, 7u, 100u, 1001u}) {
      std::vector<RankRun> runs(world_size);
      for (uint32_t rank = 0; rank < world_size; ++rank) {
        ProgramBuilder program("test");
        AppendReduceScatterRing(program, rank, world_size, hw::Slot::kResult, count);
        runs[rank].program = std::move(program).Finish();
        runs[rank].call.rank = rank;
        runs[rank].call.datatype = hw::DataType::kInt64;
        auto& buffer = runs[rank].buffers[static_cast<size_t>(hw::Slot::kResult)];
        buffer.resize(count * sizeof(int64_t));
        for (uint64_t i = 0; i < count; ++i) {
          const int64_t value = 1000 * int64_t{rank} + static_cast<int64_t>(i);
          std::memcpy(buffer.data() + i * sizeof(int64_t), &value, sizeof(value));
        }
      }
      const absl::Status status = Execute(runs);
      ASSERT_TRUE(status.ok()) << world_size << " ranks, count " << count << ": " << status;
      for (uint32_t rank = 0; rank < world_size; ++rank) {
        const patterns::Chunk chunk = patterns::RingChunk(count, world_size, rank);
        const auto& buffer = runs[rank].buffers[static_cast<size_t>(hw::Slot::kResult)];
        for (uint64_t i = chunk.offset; i < chunk.offset + chunk.count; ++i) {
          int64_t got;
          std::memcpy(&got, buffer.data() + i * sizeof(int64_t), sizeof(got));
          const int64_t n = world_size;
          ASSERT_EQ(got, 1000 * n * (n - 1) / 2 + n * static_cast<int64_t>(i))
              << world_size << " ranks, count " << count << ", rank " << rank << " [" << i << "]";
        }
      }
    }
  }
}

}  // namespace
}  // namespace cclo::firmware
