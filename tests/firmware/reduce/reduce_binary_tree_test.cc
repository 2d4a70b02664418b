#include "firmware/reduce/reduce_binary_tree.h"

#include <cstring>
#include <vector>

#include "firmware/verifier.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

hw::Program Generate(uint32_t rank, uint32_t world_size, uint32_t root, uint64_t count) {
  hw::CallDescriptor call;
  call.collective = hw::Collective::kReduce;
  call.rank = rank;
  call.root = root;
  call.count = count;
  absl::StatusOr<hw::Program> program = GenerateReduceBinaryTree(call, world_size);
  EXPECT_TRUE(program.ok()) << program.status();
  return *program;
}

TEST(ReduceBinaryTreeShapeTest, LeavesSendInnerRanksFoldTheRootKeeps) {
  EXPECT_TRUE(Generate(0, 4, 0, 0).moves.empty());
  // 6 ranks rooted at 0: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5}.
  const hw::Program leaf = Generate(4, 6, 0, 10);
  EXPECT_EQ(leaf.algorithm, "binary_tree");
  ASSERT_EQ(leaf.moves.size(), 1u);
  EXPECT_EQ(leaf.moves[0].op0, hw::Endpoint::Memory(hw::Slot::kOp0, 0));
  EXPECT_EQ(leaf.moves[0].result, hw::Endpoint::Network(1, hw::kCollectiveTag));
  EXPECT_EQ(leaf.scratch_elements, 0u);
  const hw::Program inner = Generate(1, 6, 0, 10);
  ASSERT_EQ(inner.moves.size(), 3u);
  EXPECT_EQ(inner.scratch_elements, 10u);
  EXPECT_EQ(inner.moves[0].op0, hw::Endpoint::Network(3, hw::kCollectiveTag));
  EXPECT_EQ(inner.moves[1].op0, hw::Endpoint::Network(4, hw::kCollectiveTag));
  EXPECT_EQ(inner.moves[2].op0, hw::Endpoint::Memory(hw::Slot::kScratch, 0));
  EXPECT_EQ(inner.moves[2].result, hw::Endpoint::Network(0, hw::kCollectiveTag));
  const hw::Program root = Generate(0, 6, 0, 10);
  ASSERT_EQ(root.moves.size(), 2u);
  EXPECT_EQ(root.scratch_elements, 0u);
  EXPECT_EQ(root.moves[1].result, hw::Endpoint::Memory(hw::Slot::kResult, 0));
  // Alone: a copy of op0 into result.
  ASSERT_EQ(Generate(0, 1, 0, 10).moves.size(), 1u);
}

// The exported steps with the input in result at every rank (as allreduce in place uses
// them): rank r holds result[i] = 1000 r + i; afterwards the root's result holds the sums.
TEST(ReduceBinaryTreeTest, AppendReducesIntoTheRootInPlaceAtEveryRank) {
  const hw::Endpoint result = hw::Endpoint::Memory(hw::Slot::kResult, 0);
  for (uint32_t world_size : {1u, 2u, 3u, 6u, 13u}) {
    for (uint32_t root = 0; root < world_size; ++root) {
      const uint64_t count = 9;
      std::vector<RankRun> runs(world_size);
      for (uint32_t rank = 0; rank < world_size; ++rank) {
        ProgramBuilder program("test");
        program.SetScratch(
            AppendReduceBinaryTree(program, rank, world_size, root, result, result, count));
        runs[rank].program = std::move(program).Finish();
        runs[rank].call.rank = rank;
        runs[rank].call.count = count;
        runs[rank].call.datatype = hw::DataType::kInt64;
        auto& buffer = runs[rank].buffers[static_cast<size_t>(hw::Slot::kResult)];
        buffer.resize(count * sizeof(int64_t));
        for (uint64_t i = 0; i < count; ++i) {
          const int64_t value = 1000 * int64_t{rank} + static_cast<int64_t>(i);
          std::memcpy(buffer.data() + i * sizeof(int64_t), &value, sizeof(value));
        }
      }
      const absl::Status status = Execute(runs);
      ASSERT_TRUE(status.ok()) << world_size << " ranks, root " << root << ": " << status;
      const auto& buffer = runs[root].buffers[static_cast<size_t>(hw::Slot::kResult)];
      for (uint64_t i = 0; i < count; ++i) {
        int64_t got;
        std::memcpy(&got, buffer.data() + i * sizeof(int64_t), sizeof(got));
        const int64_t n = world_size;
        ASSERT_EQ(got, 1000 * n * (n - 1) / 2 + n * static_cast<int64_t>(i))
            << world_size << " ranks, root " << root << " [" << i << "]";
      }
    }
  }
}

}  // namespace
}  // namespace cclo::firmware
