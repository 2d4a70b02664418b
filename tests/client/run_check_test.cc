// cclo-run's reference: every rank's buffers as FillBuffers leaves them, run through a plain
// model of each collective (in place too), must match FindMismatch's expectations; and any
// change to an output is found, in every datatype.
#include <algorithm>
#include <cstring>
#include <vector>

#include "client/run/check.h"
#include "gtest/gtest.h"

namespace cclo::run {
namespace {

constexpr Op kAllOps[] = {Op::kSendRecv,  Op::kBcast,  Op::kScatter,   Op::kGather,
                          Op::kAllgather, Op::kReduce, Op::kAllreduce, Op::kReduceScatter,
                          Op::kAlltoall,  Op::kBarrier};

TEST(CheckTest, PatternIsSmallAndVaries) {
  for (uint32_t rank = 0; rank < 4; ++rank) {
    for (uint64_t index = 0; index < 100; ++index) {
      const int64_t value = PatternValue(hw::DataType::kInt32, rank, index, 5);
      EXPECT_GE(value, -30);
      EXPECT_LE(value, 30);
      const int64_t unsigned_value = PatternValue(hw::DataType::kUint8, rank, index, 5);
      EXPECT_GE(unsigned_value, 0);
      EXPECT_LE(unsigned_value, 60);
    }
  }
  const hw::DataType type = hw::DataType::kFloat32;
  EXPECT_NE(PatternValue(type, 0, 0, 1), PatternValue(type, 1, 0, 1));  // ranks differ
  EXPECT_NE(PatternValue(type, 0, 0, 1), PatternValue(type, 0, 1, 1));  // indices differ
  EXPECT_NE(PatternValue(type, 0, 0, 1), PatternValue(type, 0, 0, 2));  // runs differ
}

// One rank's buffers, as int64 elements.
struct Buffers {
  std::vector<int64_t> send;
  std::vector<int64_t> recv;
};

int64_t Reduce(hw::ReduceOp op, int64_t a, int64_t b) {
  switch (op) {
    case hw::ReduceOp::kMax:
      return std::max(a, b);
    case hw::ReduceOp::kMin:
      return std::min(a, b);
    case hw::ReduceOp::kProd:
      return a * b;
    case hw::ReduceOp::kSum:
      break;
  }
  return a + b;
}

// What the collective does to every rank's buffers, written plainly from the MPI semantics
// and the in-place layouts of firmware/contract.h; `inputs` are the buffers before the op.
void Model(const std::vector<OpShape>& shapes, const std::vector<Buffers>& inputs,
           std::vector<Buffers>& outputs) {
  const OpShape& any = shapes[0];
  const uint32_t size = any.size;
  const uint64_t n = any.count;
  // Where rank q's input starts: in recv in place (at the contract's spot), else in send.
  auto input = [&](uint32_t q) -> const int64_t* {
    const OpShape& shape = shapes[q];
    if (!shape.in_place) return inputs[q].send.data();
    if (shape.op == Op::kGather) return inputs[q].recv.data() + shape.root * n;
    if (shape.op == Op::kAllgather) return inputs[q].recv.data() + q * n;
    return inputs[q].recv.data();
  };
  auto reduced = [&](uint64_t index) {
    int64_t result = input(0)[index];
    for (uint32_t q = 1; q < size; ++q) result = Reduce(any.reduce_op, result, input(q)[index]);
    return result;
  };
  for (uint32_t r = 0; r < size; ++r) {
    std::vector<int64_t>& out = outputs[r].recv;
    const uint32_t root = any.root;
    for (uint64_t i = 0; i < n; ++i) {
      switch (any.op) {
        case Op::kSendRecv:
          out[i] = inputs[(r + size - 1) % size].send[i];
          break;
        case Op::kBcast:
          out[i] = inputs[root].recv[i];
          break;
        case Op::kScatter: {
          const int64_t* source =
              shapes[root].in_place ? inputs[root].recv.data() : inputs[root].send.data();
          if (!(r == root && shapes[root].in_place)) out[i] = source[r * n + i];
          break;
        }
        case Op::kGather:
          if (r != root) break;
          for (uint32_t q = 0; q < size; ++q) out[q * n + i] = input(q)[i];
          break;
        case Op::kAllgather:
          for (uint32_t q = 0; q < size; ++q) out[q * n + i] = input(q)[i];
          break;
        case Op::kReduce:
          if (r == root) out[i] = reduced(i);
          break;
        case Op::kAllreduce:
          out[i] = reduced(i);
          break;
        case Op::kReduceScatter:
          out[i] = reduced(r * n + i);
          break;
        case Op::kAlltoall:
          for (uint32_t q = 0; q < size; ++q) out[q * n + i] = input(q)[r * n + i];
          break;
        case Op::kBarrier:
          break;
      }
    }
  }
}

TEST(CheckTest, ReferenceMatchesAPlainModelOfEveryCollective) {
  const uint64_t salt = 9;
  const hw::DataType type = hw::DataType::kInt64;
  for (Op op : kAllOps) {
    for (uint32_t size : {1u, 2u, 3u, 5u}) {
      if (op == Op::kSendRecv && size == 1) continue;
      for (uint32_t root = 0; root < size; ++root) {
        for (uint64_t count : {0u, 1u, 4u}) {
          for (bool in_place : {false, true}) {
            for (hw::ReduceOp reduce : {hw::ReduceOp::kSum, hw::ReduceOp::kMin}) {
              std::vector<OpShape> shapes;
              std::vector<Buffers> buffers;
              for (uint32_t rank = 0; rank < size; ++rank) {
                const OpShape shape{op,   type,   rank,  size,
                                    root, reduce, count, ShapeInPlace(op, rank, root, in_place)};
                const BufferElements elements = ElementsOf(shape);
                // At least one element each, as the daemon makes buffers.
                Buffers rank_buffers{std::vector<int64_t>(std::max<uint64_t>(elements.send, 1)),
                                     std::vector<int64_t>(std::max<uint64_t>(elements.recv, 1))};
                FillBuffers(shape, salt, rank_buffers.send.data(), rank_buffers.recv.data());
                shapes.push_back(shape);
                buffers.push_back(std::move(rank_buffers));
              }
              std::vector<Buffers> outputs = buffers;
              Model(shapes, buffers, outputs);
              for (uint32_t rank = 0; rank < size; ++rank) {
                std::optional<Mismatch> mismatch =
                    FindMismatch(shapes[rank], outputs[rank].recv.data(), salt);
                EXPECT_FALSE(mismatch.has_value())
                    << OpName(op) << " size " << size << " root " << root << " count " << count
                    << (in_place ? " in place" : "") << " rank " << rank << ": index "
                    << mismatch->index << " expected " << mismatch->expected << " got "
                    << mismatch->got;
              }
            }
          }
        }
      }
    }
  }
}

TEST(CheckTest, InPlaceOnlyWhereTheCollectiveHasIt) {
  EXPECT_TRUE(ShapeInPlace(Op::kAllreduce, 1, 0, true));
  EXPECT_FALSE(ShapeInPlace(Op::kAllreduce, 1, 0, false));
  EXPECT_TRUE(ShapeInPlace(Op::kGather, 0, 0, true));
  EXPECT_FALSE(ShapeInPlace(Op::kGather, 1, 0, true));  // rooted: the root only
  for (Op op : {Op::kSendRecv, Op::kBcast, Op::kBarrier})
    EXPECT_FALSE(ShapeInPlace(op, 0, 0, true));
}

TEST(CheckTest, SentinelIsNeverAResultOfSmallWorlds) {
  for (hw::DataType type : {hw::DataType::kInt8, hw::DataType::kUint8, hw::DataType::kFloat16,
                            hw::DataType::kFloat32}) {
    for (uint32_t size = 1; size <= 4; ++size) {
      const OpShape shape{Op::kAllreduce, type, 0, size, 0, hw::ReduceOp::kSum, 61};
      for (uint64_t index = 0; index < 61; ++index) {
        EXPECT_NE(ExpectedValue(shape, index, 3), Sentinel(type));
      }
    }
  }
}

TEST(CheckTest, EightBitSumsWrapAsTheEngineDoes) {
  // Nine int8 ranks: some sums leave [-128, 127] and wrap modulo 256 in the engine.
  const uint64_t count = 61;
  const OpShape shape{Op::kAllreduce, hw::DataType::kInt8, 0, 9, 0, hw::ReduceOp::kSum, count};
  std::vector<int8_t> sums(count, 0);
  bool wrapped = false;
  for (uint64_t i = 0; i < count; ++i) {
    int64_t exact = 0;
    for (uint32_t rank = 0; rank < 9; ++rank) {
      const int64_t value = PatternValue(hw::DataType::kInt8, rank, i, 2);
      exact += value;
      sums[i] = static_cast<int8_t>(sums[i] + value);
    }
    wrapped |= exact != sums[i];
  }
  EXPECT_TRUE(wrapped);
  EXPECT_FALSE(FindMismatch(shape, sums.data(), 2).has_value());
}

class CheckDataTypeTest : public ::testing::TestWithParam<hw::DataType> {};

TEST_P(CheckDataTypeTest, FilledReferencePassesAndAnyChangeIsFound) {
  const hw::DataType type = GetParam();
  const uint64_t count = 257;
  // The bcast root's input is its output: FillBuffers writes exactly the reference.
  OpShape shape{Op::kBcast, type, 2, 3, 2, hw::ReduceOp::kSum, count};
  std::vector<uint8_t> send(1), data(count * hw::DataTypeSize(type));
  FillBuffers(shape, 4, send.data(), data.data());
  EXPECT_FALSE(FindMismatch(shape, data.data(), 4).has_value());
  EXPECT_EQ(FindMismatch(shape, data.data(), 5)->index, 0u);  // a stale run

  data[100 * hw::DataTypeSize(type)] ^= 1;
  std::optional<Mismatch> mismatch = FindMismatch(shape, data.data(), 4);
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_EQ(mismatch->index, 100u);
  EXPECT_NE(mismatch->expected, mismatch->got);

  // Away from the root the output starts as the sentinel, which fails at index 0.
  shape.rank = 0;
  FillBuffers(shape, 4, send.data(), data.data());
  mismatch = FindMismatch(shape, data.data(), 4);
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_EQ(mismatch->index, 0u);
  EXPECT_EQ(mismatch->got, std::to_string(Sentinel(type)));
  shape.count = 0;
  EXPECT_FALSE(FindMismatch(shape, data.data(), 4).has_value());
}

INSTANTIATE_TEST_SUITE_P(AllDataTypes, CheckDataTypeTest,
                         ::testing::Values(hw::DataType::kInt8, hw::DataType::kUint8,
                                           hw::DataType::kInt32, hw::DataType::kInt64,
                                           hw::DataType::kFloat16, hw::DataType::kBfloat16,
                                           hw::DataType::kFloat32, hw::DataType::kFloat64),
                         [](const auto& info) {
                           return std::string(hw::DataTypeName(info.param));
                         });

}  // namespace
}  // namespace cclo::run
