#include "firmware/allgather/allgather_ring.h"

#include <cstring>
#include <vector>

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

hw::CallDescriptor Call(uint32_t rank, uint64_t count, bool in_place) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kAllgather;
  call.rank = rank;
  call.count = count;
  call.in_place = in_place;
  return call;
}

// The contribution is copied to chunk `rank`, then the ring runs over size*count elements
// in chunks of exactly count.
TEST(AllgatherRingShapeTest, CopyThenRingOverWholeChunks) {
  absl::StatusOr<hw::Program> program = GenerateAllgatherRing(Call(2, 5, false), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "ring");
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 1u + 2 * 3);
  EXPECT_EQ(program->moves[0].op0, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(program->moves[0].result, hw::Endpoint::Memory(hw::Slot::kResult, 10));
  // Step 0: chunk 1 from the left, our chunk 2 (after the copy) to the right.
  EXPECT_EQ(program->moves[1].op0, hw::Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[1].result, hw::Endpoint::Memory(hw::Slot::kResult, 5));
  EXPECT_EQ(program->moves[2].op0, hw::Endpoint::Memory(hw::Slot::kResult, 10));
  EXPECT_EQ(program->moves[2].result, hw::Endpoint::Network(3, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[2].deps, std::vector<uint32_t>{0});
  for (const hw::Move& move : program->moves) EXPECT_EQ(move.count, 5u);
  // In place the contribution is there already.
  program = GenerateAllgatherRing(Call(2, 5, true), 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->moves.size(), 2u * 3);
  // One rank: the copy only; count 0: nothing.
  EXPECT_EQ(GenerateAllgatherRing(Call(0, 5, false), 1)->moves.size(), 1u);
  EXPECT_TRUE(GenerateAllgatherRing(Call(0, 5, true), 1)->moves.empty());
  EXPECT_TRUE(GenerateAllgatherRing(Call(1, 0, false), 4)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
