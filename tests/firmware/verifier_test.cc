// Execute on hand-made programs: correct ones run, and each kind of fault is caught.
#include "firmware/verifier.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint32_t kTag = 3;

hw::Move Copy(Endpoint from, Endpoint to, uint64_t count, std::vector<uint32_t> deps = {}) {
  hw::Move move;
  move.op0 = from;
  move.result = to;
  move.count = count;
  move.deps = std::move(deps);
  return move;
}

hw::Move Reduce(Endpoint a, Endpoint b, Endpoint to, uint64_t count,
                std::vector<uint32_t> deps = {}) {
  hw::Move move = Copy(a, to, count, std::move(deps));
  move.op1 = b;
  move.function = hw::Function::kReduce;
  return move;
}

Endpoint Mem(Slot slot, uint64_t offset = 0) { return Endpoint::Memory(slot, offset); }
Endpoint Net(uint32_t peer, uint32_t tag = kTag) { return Endpoint::Network(peer, tag); }

// A rank with int32 sum and three buffers of 8 elements; op0 holds 10*rank + i.
RankRun Rank(uint32_t rank, std::vector<hw::Move> moves) {
  RankRun run;
  run.call.rank = rank;
  run.call.datatype = hw::DataType::kInt32;
  run.call.reduce_op = hw::ReduceOp::kSum;
  run.program.moves = std::move(moves);
  for (auto& buffer : run.buffers) buffer.assign(8 * sizeof(int32_t), std::byte{0});
  for (int32_t i = 0; i < 8; ++i) {
    const int32_t value = 10 * static_cast<int32_t>(rank) + i;
    std::memcpy(run.buffers[0].data() + i * sizeof(int32_t), &value, sizeof(value));
  }
  return run;
}

int32_t At(const RankRun& run, Slot slot, size_t index) {
  int32_t value;
  std::memcpy(&value, run.buffers[static_cast<size_t>(slot)].data() + index * sizeof(value),
              sizeof(value));
  return value;
}

std::string Fails(std::vector<RankRun> runs) {
  const absl::Status status = Execute(runs);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  return std::string(status.message());
}

TEST(ExecuteTest, ExchangeAndReduce) {
  // Each rank sends op0[0, 4) to the other and reduces what arrives with its own op0 into
  // result; the receive is first, so the send completes before it (out of order).
  std::vector<RankRun> runs;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    runs.push_back(Rank(rank, {Reduce(Net(1 - rank), Mem(Slot::kOp0), Mem(Slot::kResult), 4),
                               Copy(Mem(Slot::kOp0), Net(1 - rank), 4)}));
  }
  ASSERT_TRUE(Execute(runs).ok()) << Execute(runs);
  for (const RankRun& run : runs) {
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(At(run, Slot::kResult, i), 10 + 2 * int32_t(i));
    EXPECT_EQ(At(run, Slot::kResult, 4), 0);
  }
}

TEST(ExecuteTest, MatchesByRouteInProgramOrder) {
  // Same tag: the first send meets the first receive. Different tags: independent.
  std::vector<RankRun> runs = {
      Rank(0, {Copy(Mem(Slot::kOp0, 0), Net(1), 2), Copy(Mem(Slot::kOp0, 2), Net(1), 3),
               Copy(Mem(Slot::kOp0, 5), Net(1, 9), 1)}),
      Rank(1, {Copy(Net(0, 9), Mem(Slot::kResult, 7), 1), Copy(Net(0), Mem(Slot::kResult), 2),
               Copy(Net(0), Mem(Slot::kResult, 2), 3)})};
  ASSERT_TRUE(Execute(runs).ok()) << Execute(runs);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(At(runs[1], Slot::kResult, i), int32_t(i));
  EXPECT_EQ(At(runs[1], Slot::kResult, 7), 5);
}

TEST(ExecuteTest, TransitiveDepsOrderHazards) {
  // 0 writes result[0, 4); 1 waits for 0; 2 reads result[0, 4) and waits for 1 only.
  std::vector<RankRun> runs = {Rank(0, {Copy(Mem(Slot::kOp0), Mem(Slot::kResult), 4),
                                        Copy(Mem(Slot::kOp0, 4), Mem(Slot::kOp1), 4, {0}),
                                        Copy(Mem(Slot::kResult), Mem(Slot::kOp1, 4), 4, {1})})};
  ASSERT_TRUE(Execute(runs).ok()) << Execute(runs);
  EXPECT_EQ(At(runs[0], Slot::kOp1, 7), 3);
}

TEST(ExecuteTest, CatchesMissingDependency) {
  // A receive writes result[0, 4) and a send forwards it without waiting for it.
  std::vector<RankRun> runs = {
      Rank(0, {Copy(Net(1), Mem(Slot::kResult), 4), Copy(Mem(Slot::kResult, 2), Net(1), 4)}),
      Rank(1, {Copy(Mem(Slot::kOp0), Net(0), 4), Copy(Net(0), Mem(Slot::kResult), 4)})};
  EXPECT_THAT(Fails(runs), HasSubstr("rank 0 move 1 reads elements [2, 6) of slot 2 that "
                                     "move 0 writes without depending on it"));
  // Write after read is a hazard too.
  runs = {Rank(0, {Copy(Mem(Slot::kOp0), Mem(Slot::kResult), 4),
                   Copy(Mem(Slot::kOp1), Mem(Slot::kOp0, 3), 1)})};
  EXPECT_THAT(Fails(runs), HasSubstr("rank 0 move 1 writes elements [3, 4) of slot 0"));
}

TEST(ExecuteTest, CatchesOutOfBounds) {
  std::vector<RankRun> runs = {Rank(0, {Copy(Mem(Slot::kOp0, 5), Mem(Slot::kResult), 4)})};
  EXPECT_THAT(Fails(runs), HasSubstr("rank 0 move 0 accesses elements [5, +4) of slot 0, "
                                     "which holds 8"));
  runs = {Rank(0, {Copy(Mem(Slot::kOp0), Mem(Slot::kResult, ~uint64_t{0}), 2)})};
  EXPECT_THAT(Fails(runs), HasSubstr("of slot 2, which holds 8"));
}

TEST(ExecuteTest, CatchesUnmatchedSend) {
  // Nothing is buffered: a send nobody receives never completes.
  std::vector<RankRun> runs = {Rank(0, {Copy(Mem(Slot::kOp0), Net(1), 4)}), Rank(1, {})};
  EXPECT_THAT(Fails(runs), HasSubstr("deadlock: rank 0 (move 0 waits for rank 1 to receive "
                                     "message 0 tag 3)"));
}

TEST(ExecuteTest, SendsAreNotBuffered) {
  // Each rank sends, then receives into the buffer it sends from. With buffered sends this
  // works; under rendezvous the sends wait for receives that wait for the sends.
  std::vector<RankRun> runs;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    hw::Move receive = Copy(Net(1 - rank), Mem(Slot::kOp0), 4);
    receive.deps = {0};
    runs.push_back(Rank(rank, {Copy(Mem(Slot::kOp0), Net(1 - rank), 4), receive}));
  }
  EXPECT_THAT(Fails(runs), HasSubstr("deadlock"));
}

TEST(ExecuteTest, ScratchIsTheProgramsOwn) {
  // Bounded by count x world size, and sized from the program.
  std::vector<RankRun> runs = {Rank(0, {Copy(Mem(Slot::kOp0), Mem(Slot::kScratch), 4),
                                        Copy(Mem(Slot::kScratch), Mem(Slot::kResult), 4)})};
  runs[0].call.count = 4;
  runs[0].program.moves[1].deps = {0};
  runs[0].program.scratch_elements = 4;
  ASSERT_TRUE(Execute(runs).ok());
  EXPECT_EQ(runs[0].buffers[static_cast<size_t>(Slot::kScratch)].size(), 4 * sizeof(int32_t));
  runs[0].program.scratch_elements = 5;
  EXPECT_THAT(Fails(runs), HasSubstr("rank 0 asks for 5 scratch elements; at most 4"));
}

TEST(ExecuteTest, CatchesDeadlock) {
  // Both ranks wait to receive before they send.
  std::vector<RankRun> runs;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    runs.push_back(Rank(rank, {Copy(Net(1 - rank), Mem(Slot::kResult), 4),
                               Copy(Mem(Slot::kResult), Net(1 - rank), 4, {0})}));
  }
  EXPECT_THAT(Fails(runs),
              AllOf(HasSubstr("deadlock"),
                    HasSubstr("rank 0 (move 0 waits for message 0 from rank 1 tag 3; "
                              "move 1 waits for moves 0)"),
                    HasSubstr("rank 1 (move 0 waits for message 0 from rank 0 tag 3")));
  // An unmatched receive is a deadlock of its own.
  runs = {Rank(0, {Copy(Net(1), Mem(Slot::kResult), 1)}), Rank(1, {})};
  EXPECT_THAT(Fails(runs), HasSubstr("deadlock: rank 0 (move 0 waits for message 0"));
}

TEST(ExecuteTest, CatchesCountMismatch) {
  std::vector<RankRun> runs = {Rank(0, {Copy(Mem(Slot::kOp0), Net(1), 4)}),
                               Rank(1, {Copy(Net(0), Mem(Slot::kResult), 5)})};
  EXPECT_THAT(Fails(runs), HasSubstr("rank 1 move 0 receives 5 elements of 4 bytes but the "
                                     "matching send (rank 0 move 0) carries 4 of 4"));
}

TEST(ExecuteTest, CatchesBadPeers) {
  std::vector<RankRun> runs = {Rank(0, {Copy(Mem(Slot::kOp0), Net(0), 1)})};
  EXPECT_THAT(Fails(runs), HasSubstr("rank 0 move 0 names network peer 0, not another rank"));
  runs = {Rank(0, {Copy(Net(2), Mem(Slot::kResult), 1)}), Rank(1, {})};
  EXPECT_THAT(Fails(runs), HasSubstr("names network peer 2, not another rank of 2"));
}

TEST(ExecuteTest, CatchesMalformedMoves) {
  EXPECT_THAT(Fails({Rank(0, {Copy(Mem(Slot::kOp0), Mem(Slot::kResult), 1, {0})})}),
              HasSubstr("rank 0 move 0 depends on move 0, which is not an earlier move"));
  hw::Move copy_with_op1 = Copy(Mem(Slot::kOp0), Mem(Slot::kResult), 1);
  copy_with_op1.op1 = Mem(Slot::kOp1);
  EXPECT_THAT(Fails({Rank(0, {copy_with_op1})}), HasSubstr("is a copy with an op1"));
  EXPECT_THAT(Fails({Rank(0, {Copy(Endpoint::None(), Mem(Slot::kResult), 1)})}),
              HasSubstr("is a copy with a missing operand"));
  EXPECT_THAT(Fails({Rank(0, {Reduce(Mem(Slot::kOp0), Endpoint::None(), Mem(Slot::kResult), 1)})}),
              HasSubstr("is a reduce with a missing operand"));
  EXPECT_THAT(Fails({Rank(0, {Copy(Net(1), Net(1), 1)}), Rank(1, {})}),
              HasSubstr("has 2 network endpoints"));
  EXPECT_THAT(Fails({Rank(0, {Reduce(Mem(Slot::kOp0), Mem(Slot::kOp1, 1), Mem(Slot::kOp1), 2)})}),
              HasSubstr("reads and writes overlapping but different ranges of slot 1"));
  std::vector<RankRun> runs = {Rank(1, {})};
  EXPECT_THAT(Fails(runs), HasSubstr("runs[0] carries a call for rank 1"));
}

}  // namespace
}  // namespace cclo::firmware
