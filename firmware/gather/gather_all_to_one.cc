#include "firmware/gather/gather_all_to_one.h"

#include <utility>

#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateGatherAllToOne(const hw::CallDescriptor& call,
                                                   uint32_t world_size) {
  ProgramBuilder program("all_to_one");
  const uint64_t n = call.count;
  if (n == 0) return std::move(program).Finish();
  const Endpoint input = Endpoint::Memory(Slot::kOp0, 0);
  if (call.rank != call.root) {
    // 1. Send this rank's contribution to the root.
    program.Copy(input, Endpoint::Network(call.root, hw::kCollectiveTag), n);
    return std::move(program).Finish();
  }
  // 1. Receive chunk i from rank i straight into place; the chunks are disjoint, so every
  //    receive runs at once.
  for (uint32_t rank = 0; rank < world_size; ++rank) {
    if (rank == call.root) continue;
    program.Copy(Endpoint::Network(rank, hw::kCollectiveTag),
                 Endpoint::Memory(Slot::kResult, rank * n), n);
  }
  // 2. Put the root's own contribution in place (in place it is there already).
  if (!call.in_place) program.Copy(input, Endpoint::Memory(Slot::kResult, call.root * n), n);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
