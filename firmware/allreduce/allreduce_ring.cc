#include "firmware/allreduce/allreduce_ring.h"

#include <utility>

#include "firmware/allgather/allgather_ring.h"
#include "firmware/program_builder.h"
#include "firmware/reduce_scatter/reduce_scatter_ring.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateAllreduceRing(const hw::CallDescriptor& call,
                                                  uint32_t world_size) {
  ProgramBuilder program("ring");
  if (call.count == 0) return std::move(program).Finish();
  // 1. Our contribution goes to the result buffer (already there in place), where both
  //    rings work in place.
  if (!call.in_place) {
    program.Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Memory(Slot::kResult, 0), call.count);
  }
  // 2. Reduce-scatter: after size-1 steps chunk r holds the full reduction.
  AppendReduceScatterRing(program, call.rank, world_size, Slot::kResult, call.count);
  // 3. Allgather: size-1 more steps hand every reduced chunk to every rank.
  AppendAllgatherRing(program, call.rank, world_size, Slot::kResult, call.count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
