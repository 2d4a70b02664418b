#include "hw/emu/program_check.h"

#include <vector>

#include "gtest/gtest.h"

namespace cclo::hw::emu {
namespace {

class ProgramCheckTest : public ::testing::Test {
 protected:
  ProgramCheckTest() {
    call_.collective = Collective::kAllreduce;
    call_.datatype = DataType::kFloat32;
    for (int i = 0; i < kSlotCount; ++i) buffers_.views[i] = {memory_[i], 40};
  }

  /// The error for a one-move program, or "" if it passes.
  std::string Check(const Move& move) {
    Program program{.algorithm = "test", .moves = {move}};
    absl::Status status = CheckProgram(program, call_, buffers_, 3);
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    }
    return std::string(status.message());
  }

  CallDescriptor call_;
  std::byte memory_[kSlotCount][40];
  CallBuffers buffers_;
};

Endpoint Mem(Slot slot, uint64_t offset) { return Endpoint::Memory(slot, offset); }

TEST_F(ProgramCheckTest, AcceptsWellFormedMoves) {
  EXPECT_EQ(Check({.op0 = Mem(Slot::kOp0, 0), .result = Mem(Slot::kResult, 0), .count = 10}), "");
  EXPECT_EQ(Check({.op0 = Endpoint::Network(2, 1),
                   .op1 = Mem(Slot::kResult, 2),
                   .result = Mem(Slot::kResult, 2),
                   .function = Function::kReduce,
                   .count = 8}),
            "");
  EXPECT_EQ(Check({.op0 = Endpoint::Network(1, 1), .count = 3}), "");  // discarded
  EXPECT_EQ(Check({.op0 = Mem(Slot::kOp0, 10), .result = Endpoint::Network(1, 1), .count = 0}), "");
}

TEST_F(ProgramCheckTest, RejectsOutOfBoundsMemory) {
  EXPECT_EQ(Check({.op0 = Mem(Slot::kOp0, 5), .result = Mem(Slot::kResult, 0), .count = 6}),
            "move 0 of program 'test' for allreduce: op0 elements [5, 11) of 4 bytes lie outside "
            "the op0 buffer of 40 bytes");
  EXPECT_NE(Check({.op0 = Mem(Slot::kOp0, ~0ull), .result = Mem(Slot::kResult, 0), .count = 2})
                .find("outside the op0 buffer"),
            std::string::npos);
  buffers_.views[1] = {nullptr, 40};
  EXPECT_NE(Check({.op0 = Mem(Slot::kOp1, 0), .result = Mem(Slot::kResult, 0), .count = 1})
                .find("outside the op1 buffer"),
            std::string::npos);
}

TEST_F(ProgramCheckTest, RejectsMalformedMoves) {
  const Endpoint net = Endpoint::Network(1, 0);
  EXPECT_NE(Check({.op0 = net, .result = net, .count = 1}).find("has 2 network endpoints"),
            std::string::npos);
  EXPECT_NE(Check({.op0 = Endpoint::Network(3, 0), .result = Mem(Slot::kResult, 0), .count = 1})
                .find("op0 names peer rank 3 of a 3-rank communicator"),
            std::string::npos);
  EXPECT_NE(Check({.result = Mem(Slot::kResult, 0), .count = 1}).find("has no op0"),
            std::string::npos);
  EXPECT_NE(Check({.op0 = Mem(Slot::kOp0, 0),
                   .op1 = Mem(Slot::kOp1, 0),
                   .result = Mem(Slot::kResult, 0),
                   .count = 1})
                .find("is a copy with an op1"),
            std::string::npos);
  EXPECT_NE(
      Check(
          {.op0 = net, .result = Mem(Slot::kResult, 0), .function = Function::kReduce, .count = 1})
          .find("is a reduce without op1"),
      std::string::npos);
  EXPECT_NE(Check({.op0 = Mem(Slot::kOp0, 0), .count = 1}).find("writes nowhere"),
            std::string::npos);
  EXPECT_NE(Check({.op0 = Mem(Slot::kOp0, 0),
                   .op1 = Mem(Slot::kResult, 1),
                   .result = Mem(Slot::kResult, 0),
                   .function = Function::kReduce,
                   .count = 4})
                .find("partly overlaps its result"),
            std::string::npos);
  EXPECT_NE(Check({.op0 = Mem(Slot::kOp0, 0),
                   .result = Mem(Slot::kResult, 0),
                   .function = static_cast<Function>(9),
                   .count = 1})
                .find("unknown function 9"),
            std::string::npos);
  EXPECT_NE(
      Check({.op0 = Mem(static_cast<Slot>(5), 0), .result = Mem(Slot::kResult, 0), .count = 1})
          .find("names buffer slot 5"),
      std::string::npos);
}

TEST_F(ProgramCheckTest, RejectsForwardDependencies) {
  Move move{.op0 = Mem(Slot::kOp0, 0), .result = Mem(Slot::kResult, 0), .count = 1};
  Program program{.algorithm = "test", .moves = {move, move}};
  program.moves[1].deps = {1};
  EXPECT_EQ(CheckProgram(program, call_, buffers_, 3).message(),
            "move 1 of program 'test' for allreduce: depends on move 1, not an earlier one");
  program.moves[1].deps = {0};
  EXPECT_TRUE(CheckProgram(program, call_, buffers_, 3).ok());
}

}  // namespace
}  // namespace cclo::hw::emu
