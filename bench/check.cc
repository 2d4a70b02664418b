#include "bench/check.h"

#include "absl/strings/str_cat.h"

namespace cclo::bench {
namespace {

// The cclo-run op whose buffers and result `op` has.
run::Op RunOp(Op op) {
  switch (op) {
    case Op::kSendRecv:
    case Op::kSend:
      return run::Op::kSendRecv;
    case Op::kBcast:
      return run::Op::kBcast;
    case Op::kReduce:
      return run::Op::kReduce;
    case Op::kAllgather:
      return run::Op::kAllgather;
    case Op::kReduceScatter:
      return run::Op::kReduceScatter;
    case Op::kAlltoall:
      return run::Op::kAlltoall;
    case Op::kAllreduce:
    case Op::kNop:
    case Op::kNopGrpc:
      break;
  }
  return run::Op::kAllreduce;
}

}  // namespace

run::OpShape FillShape(Op op, hw::DataType datatype, uint32_t rank, uint32_t ranks,
                       uint64_t count) {
  run::OpShape shape;
  shape.op = RunOp(op);
  shape.datatype = datatype;
  shape.rank = rank;
  shape.size = ranks;
  shape.count = count;
  return shape;
}

std::optional<run::OpShape> CheckShape(Op op, hw::DataType datatype, uint32_t rank, uint32_t ranks,
                                       uint64_t count) {
  if (IsNop(op)) return std::nullopt;
  run::OpShape shape = FillShape(op, datatype, rank, ranks, count);
  if (op != Op::kSend) return shape;
  const uint32_t half = ranks / 2;
  if (rank < half || rank >= 2 * half) return std::nullopt;
  shape.rank = rank - half + 1;
  return shape;
}

std::string MismatchText(uint32_t rank, const run::Mismatch& mismatch) {
  return absl::StrCat("rank ", rank, " index ", mismatch.index, " expected ", mismatch.expected,
                      " got ", mismatch.got);
}

}  // namespace cclo::bench
