#include "firmware/allgather/allgather_ring.h"

#include <cstring>

#include "firmware/patterns/ring.h"
#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

// Rank r starts with only chunk r filled (1000 r + i, -1 elsewhere); afterwards every rank
// holds every chunk from its owner.
TEST(AllgatherRingTest, EveryRankGetsEveryChunk) {
  for (uint32_t world_size : {1u, 2u, 3u, 5u, 8u, 13u}) {
    for (uint64_t count : {0u, 1u, 7u, 100u, 1001u}) {
      std::vector<RankRun> runs(world_size);
      std::vector<uint32_t> owner(count);
      for (uint32_t rank = 0; rank < world_size; ++rank) {
        const patterns::Chunk chunk = patterns::RingChunk(count, world_size, rank);
        for (uint64_t i = chunk.offset; i < chunk.offset + chunk.count; ++i) owner[i] = rank;
      }
      for (uint32_t rank = 0; rank < world_size; ++rank) {
        ProgramBuilder program("test");
        AppendAllgatherRing(program, rank, world_size, hw::Slot::kResult, count);
        runs[rank].program = std::move(program).Finish();
        runs[rank].call.rank = rank;
        runs[rank].call.datatype = hw::DataType::kInt32;
        auto& buffer = runs[rank].buffers[static_cast<size_t>(hw::Slot::kResult)];
        buffer.resize(count * sizeof(int32_t));
        for (uint64_t i = 0; i < count; ++i) {
          const int32_t value = owner[i] == rank ? 1000 * int32_t(rank) + int32_t(i) : -1;
          std::memcpy(buffer.data() + i * sizeof(int32_t), &value, sizeof(value));
        }
      }
      const absl::Status status = Execute(runs);
      ASSERT_TRUE(status.ok()) << world_size << " ranks, count " << count << ": " << status;
      for (uint32_t rank = 0; rank < world_size; ++rank) {
        const auto& buffer = runs[rank].buffers[static_cast<size_t>(hw::Slot::kResult)];
        for (uint64_t i = 0; i < count; ++i) {
          int32_t got;
          std::memcpy(&got, buffer.data() + i * sizeof(int32_t), sizeof(got));
          ASSERT_EQ(got, 1000 * int32_t(owner[i]) + int32_t(i))
              << world_size << " ranks, count " << count << ", rank " << rank << " [" << i << "]";
        }
      }
    }
  }
}

}  // namespace
}  // namespace cclo::firmware
