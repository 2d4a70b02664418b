#include "firmware/bcast/bcast_one_to_all.h"

#include <utility>

#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateBcastOneToAll(const hw::CallDescriptor& call,
                                                  uint32_t world_size) {
  ProgramBuilder program("one_to_all");
  if (call.count == 0) return std::move(program).Finish();
  const Endpoint buffer = Endpoint::Memory(Slot::kResult, 0);
  if (call.rank == call.root) {
    // 1. Send the whole buffer to every other rank; the sends only read, so they all run
    //    at once.
    for (uint32_t rank = 0; rank < world_size; ++rank) {
      if (rank == call.root) continue;
      program.Copy(buffer, Endpoint::Network(rank, hw::kCollectiveTag), call.count);
    }
  } else {
    // 1. Receive the buffer from the root.
    program.Copy(Endpoint::Network(call.root, hw::kCollectiveTag), buffer, call.count);
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
