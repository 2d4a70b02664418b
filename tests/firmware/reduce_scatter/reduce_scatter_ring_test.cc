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

hw::CallDescriptor Call(uint32_t rank, uint64_t count, bool in_place) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kReduceScatter;
  call.rank = rank;
  call.count = count;
  call.in_place = in_place;
  return call;
}

// op0 is reduced in scratch in chunks of exactly count, and chunk `rank` copied out.
TEST(ReduceScatterRingShapeTest, RingInScratchThenCopyOut) {
  absl::StatusOr<hw::Program> program = GenerateReduceScatterRing(Call(1, 4, false), 3);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "ring");
  EXPECT_EQ(program->scratch_elements, 12u);
  ASSERT_EQ(program->moves.size(), 1u + 2 * 2 + 1);
  EXPECT_EQ(program->moves[0].op0, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(program->moves[0].result, hw::Endpoint::Memory(hw::Slot::kScratch, 0));
  EXPECT_EQ(program->moves[0].count, 12u);
  // Step 0: partial chunk 2 arrives from rank 0 and is reduced into scratch[8, 12).
  EXPECT_EQ(program->moves[1].function, hw::Function::kReduce);
  EXPECT_EQ(program->moves[1].op0, hw::Endpoint::Network(0, hw::kCollectiveTag));
  EXPECT_EQ(program->moves[1].result, hw::Endpoint::Memory(hw::Slot::kScratch, 8));
  EXPECT_EQ(program->moves[1].count, 4u);
  const hw::Move& out = program->moves.back();
  EXPECT_EQ(out.op0, hw::Endpoint::Memory(hw::Slot::kScratch, 4));
  EXPECT_EQ(out.result, hw::Endpoint::Memory(hw::Slot::kResult, 0));
  EXPECT_EQ(out.count, 4u);
  // In place the ring runs in the result itself; rank 0's chunk is where it belongs.
  program = GenerateReduceScatterRing(Call(1, 4, true), 3);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->scratch_elements, 0u);
  ASSERT_EQ(program->moves.size(), 2u * 2 + 1);
  EXPECT_EQ(program->moves.back().op0, hw::Endpoint::Memory(hw::Slot::kResult, 4));
  EXPECT_EQ(GenerateReduceScatterRing(Call(0, 4, true), 3)->moves.size(), 2u * 2);
  // One rank: copy in and out; count 0: nothing.
  EXPECT_EQ(GenerateReduceScatterRing(Call(0, 4, false), 1)->moves.size(), 2u);
  EXPECT_TRUE(GenerateReduceScatterRing(Call(0, 4, true), 1)->moves.empty());
  EXPECT_TRUE(GenerateReduceScatterRing(Call(2, 0, false), 3)->moves.empty());
}

}  // namespace
}  // namespace cclo::firmware
