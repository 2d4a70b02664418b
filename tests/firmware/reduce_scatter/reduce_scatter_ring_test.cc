#include "firmware/reduce_scatter/reduce_scatter_ring.h"

#include <cstring>

#include "firmware/patterns/ring.h"
#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

// Rank r holds input[i] = 1000 r + i, in the result itself (in place) or in op0 with the
// result another buffer; afterwards chunk r of rank r's result holds the sum over ranks.
void ExpectChunkRHoldsTheFullSumAtRankR(hw::Slot input) {
  for (uint32_t world_size : {1u, 2u, 3u, 5u, 8u, 13u}) {
    for (uint64_t count : {0u, 1u, 7u, 100u, 1001u}) {
      std::vector<RankRun> runs(world_size);
      for (uint32_t rank = 0; rank < world_size; ++rank) {
        ProgramBuilder program("test");
        AppendReduceScatterRing(program, rank, world_size, input, hw::Slot::kResult, count,
                                std::nullopt);
        runs[rank].program = std::move(program).Finish();
        runs[rank].call.rank = rank;
        runs[rank].call.datatype = hw::DataType::kInt64;
        for (hw::Slot slot : {input, hw::Slot::kResult}) {
          runs[rank].buffers[static_cast<size_t>(slot)].resize(count * sizeof(int64_t));
        }
        auto& buffer = runs[rank].buffers[static_cast<size_t>(input)];
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

TEST(ReduceScatterRingTest, ChunkRHoldsTheFullSumAtRankRInPlace) {
  ExpectChunkRHoldsTheFullSumAtRankR(hw::Slot::kResult);
}

TEST(ReduceScatterRingTest, ChunkRHoldsTheFullSumAtRankRFromAnotherBuffer) {
  ExpectChunkRHoldsTheFullSumAtRankR(hw::Slot::kOp0);
}

hw::CallDescriptor Call(uint32_t rank, uint64_t count, bool in_place) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kReduceScatter;
  call.rank = rank;
  call.count = count;
  call.in_place = in_place;
  return call;
}

// op0 is reduced in chunks of exactly count, partial ones into scratch and the last, ours,
// straight into the result; nothing is copied in or out.
TEST(ReduceScatterRingShapeTest, RingFromOp0ThroughScratchIntoTheResult) {
  absl::StatusOr<hw::Program> program = GenerateReduceScatterRing(Call(1, 4, false), 3);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "ring");
  EXPECT_EQ(program->scratch_elements, 12u);
  ASSERT_EQ(program->moves.size(), 2u * 2);
  // Step 0: partial chunk 2 arrives from rank 0 and is reduced with op0[8, 12) into
  // scratch[8, 12); our own chunk 0 goes right from op0.
  EXPECT_EQ(program->moves[0].function, hw::Function::kReduce);
  EXPECT_EQ(program->moves[0].op0, hw::Endpoint::Network(0, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[0].op1, hw::Endpoint::Memory(hw::Slot::kOp0, 8));
  EXPECT_EQ(program->moves[0].result, hw::Endpoint::Memory(hw::Slot::kScratch, 8));
  EXPECT_EQ(program->moves[0].count, 4u);
  EXPECT_EQ(program->moves[1].op0, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(program->moves[1].result, hw::Endpoint::Network(2, hw::kCollectiveTag));
  // Step 1: chunk 1, ours, arrives and is reduced with op0[4, 8) into result[0, 4); the
  // partial chunk 2 goes on from scratch.
  EXPECT_EQ(program->moves[2].op1, hw::Endpoint::Memory(hw::Slot::kOp0, 4));
  EXPECT_EQ(program->moves[2].result, hw::Endpoint::Memory(hw::Slot::kResult, 0));
  EXPECT_EQ(program->moves[3].op0, hw::Endpoint::Memory(hw::Slot::kScratch, 8));
  // Two ranks keep no partial chunks: no scratch.
  EXPECT_EQ(GenerateReduceScatterRing(Call(1, 4, false), 2)->scratch_elements, 0u);
  // In place the ring runs in the result itself; rank 0's chunk is where it belongs.
  program = GenerateReduceScatterRing(Call(1, 4, true), 3);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 2u * 2 + 1);
  EXPECT_EQ(program->moves.back().op0, hw::Endpoint::Memory(hw::Slot::kResult, 4));
  EXPECT_EQ(GenerateReduceScatterRing(Call(0, 4, true), 3)->moves.size(), 2u * 2);
  // One rank: one copy; count 0: nothing.
  EXPECT_EQ(GenerateReduceScatterRing(Call(0, 4, false), 1)->moves.size(), 1u);
  EXPECT_TRUE(GenerateReduceScatterRing(Call(0, 4, true), 1)->moves.empty());
  EXPECT_TRUE(GenerateReduceScatterRing(Call(2, 0, false), 3)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
