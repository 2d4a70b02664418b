#include "firmware/program_builder.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;

std::vector<uint32_t> Deps(const hw::Program& program, size_t move) {
  return program.moves[move].deps;
}

TEST(ProgramBuilderTest, OrdersEveryMemoryHazardAndNothingElse) {
  ProgramBuilder builder("test");
  const Endpoint peer = Endpoint::Network(1, 5);
  // 0: write result[0, 10)
  EXPECT_EQ(builder.Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Memory(Slot::kResult, 0), 10),
            0u);
  // 1: read result[0, 4): after 0 (read after write)
  builder.Copy(Endpoint::Memory(Slot::kResult, 0), peer, 4);
  // 2: read result[2, 6): after 0 only (two reads need no order)
  builder.Copy(Endpoint::Memory(Slot::kResult, 2), peer, 4);
  // 3: write result[5, 8): after 0 (write after write) and 2 (write after read), not 1
  builder.Copy(peer, Endpoint::Memory(Slot::kResult, 5), 3);
  // 4: read op0 and op1 elsewhere: op0 was read by 0 only, so no deps
  builder.Reduce(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Memory(Slot::kOp1, 0), peer, 3);
  // 5: receive into result[10, 12): disjoint from everything
  builder.Copy(peer, Endpoint::Memory(Slot::kResult, 10), 2);
  // 6: an empty move touches nothing
  builder.Copy(peer, Endpoint::Memory(Slot::kResult, 0), 0);
  // 7: write op0[0, 1): after 0 and 4 (write after read)
  builder.Copy(peer, Endpoint::Memory(Slot::kOp0, 0), 1);

  const hw::Program program = std::move(builder).Finish();
  EXPECT_EQ(program.algorithm, "test");
  ASSERT_EQ(program.moves.size(), 8u);
  EXPECT_EQ(Deps(program, 0), (std::vector<uint32_t>{}));
  EXPECT_EQ(Deps(program, 1), (std::vector<uint32_t>{0}));
  EXPECT_EQ(Deps(program, 2), (std::vector<uint32_t>{0}));
  EXPECT_EQ(Deps(program, 3), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(Deps(program, 4), (std::vector<uint32_t>{}));
  EXPECT_EQ(Deps(program, 5), (std::vector<uint32_t>{}));
  EXPECT_EQ(Deps(program, 6), (std::vector<uint32_t>{}));
  EXPECT_EQ(Deps(program, 7), (std::vector<uint32_t>{0, 4}));
  EXPECT_EQ(program.moves[4].function, hw::Function::kReduce);
  EXPECT_EQ(program.moves[4].op1, Endpoint::Memory(Slot::kOp1, 0));
}

TEST(ProgramBuilderTest, KeepsGivenDepsSortedAndUnique) {
  ProgramBuilder builder("test");
  builder.Copy(Endpoint::Network(1, 0), Endpoint::Memory(Slot::kResult, 0), 4);
  builder.Copy(Endpoint::Network(1, 0), Endpoint::Memory(Slot::kOp1, 0), 4);
  hw::Move move;
  move.op0 = Endpoint::Memory(Slot::kResult, 0);
  move.result = Endpoint::Network(1, 0);
  move.count = 4;
  move.deps = {1, 0};
  EXPECT_EQ(builder.Add(move), 2u);
  EXPECT_EQ(std::move(builder).Finish().moves[2].deps, (std::vector<uint32_t>{0, 1}));
}

}  // namespace
}  // namespace cclo::firmware
