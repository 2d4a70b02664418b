#include "firmware/scatter/scatter_one_to_all.h"

#include <utility>

#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateScatterOneToAll(const hw::CallDescriptor& call,
                                                    uint32_t world_size) {
  ProgramBuilder program("one_to_all");
  const uint64_t n = call.count;
  if (n == 0) return std::move(program).Finish();
  const Endpoint result = Endpoint::Memory(Slot::kResult, 0);
  if (call.rank != call.root) {
    // 1. Receive this rank's chunk from the root.
    program.Copy(Endpoint::Network(call.root, hw::kCollectiveTag), result, n);
    return std::move(program).Finish();
  }
  const Slot chunks = call.in_place ? Slot::kResult : Slot::kOp0;
  // 1. Send chunk i to rank i; the sends only read, so they all run at once.
  for (uint32_t rank = 0; rank < world_size; ++rank) {
    if (rank == call.root) continue;
    program.Copy(Endpoint::Memory(chunks, rank * n), Endpoint::Network(rank, hw::kCollectiveTag),
                 n);
  }
  // 2. Keep the root's own chunk (in place it is there already).
  if (!call.in_place) program.Copy(Endpoint::Memory(Slot::kOp0, call.root * n), result, n);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
