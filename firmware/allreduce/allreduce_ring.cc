#include "firmware/allreduce/allreduce_ring.h"

#include <utility>

#include "firmware/allgather/allgather_ring.h"
#include "firmware/program_builder.h"
#include "firmware/reduce_scatter/reduce_scatter_ring.h"

namespace cclo::firmware {

using hw::Slot;

absl::StatusOr<hw::Program> GenerateAllreduceRing(const hw::CallDescriptor& call,
                                                  uint32_t world_size) {
  ProgramBuilder program("ring");
  if (call.count == 0) return std::move(program).Finish();
  // 1. Reduce-scatter from the input (op0, or the result in place) into the result: after
  //    size-1 steps chunk r holds the full reduction. Nothing is copied first.
  const Slot input = call.in_place ? Slot::kResult : Slot::kOp0;
  AppendReduceScatterRing(program, call.rank, world_size, input, Slot::kResult, call.count,
                          std::nullopt);
  // 2. Allgather: size-1 more steps hand every reduced chunk to every rank.
  AppendAllgatherRing(program, call.rank, world_size, Slot::kResult, call.count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
