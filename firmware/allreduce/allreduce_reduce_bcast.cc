#include "firmware/allreduce/allreduce_reduce_bcast.h"

#include <utility>

#include "firmware/bcast/bcast_binomial_tree.h"
#include "firmware/program_builder.h"
#include "firmware/reduce/reduce_binary_tree.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateAllreduceReduceBcast(const hw::CallDescriptor& call,
                                                         uint32_t world_size) {
  constexpr uint32_t kRoot = 0;
  ProgramBuilder program("reduce_bcast");
  // 1. Reduce every rank's input into rank 0's result buffer.
  const Endpoint input = Endpoint::Memory(call.in_place ? Slot::kResult : Slot::kOp0, 0);
  program.SetScratch(AppendReduceBinaryTree(program, call.rank, world_size, kRoot, input,
                                            Endpoint::Memory(Slot::kResult, 0), call.count));
  // 2. Broadcast it from there to every rank's result buffer.
  AppendBcastBinomialTree(program, call.rank, world_size, kRoot, Slot::kResult, call.count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
