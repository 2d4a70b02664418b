#include "firmware/scatter/scatter_ring.h"

#include <utility>

#include "firmware/patterns/binomial_tree.h"
#include "firmware/patterns/ring.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;
using patterns::ToReal;

absl::StatusOr<hw::Program> GenerateScatterRing(const hw::CallDescriptor& call,
                                                uint32_t world_size) {
  ProgramBuilder program("ring");
  const uint64_t n = call.count;
  if (n == 0) return std::move(program).Finish();
  const uint32_t root = call.root;
  const uint32_t relative = patterns::ToRelative(call.rank, root, world_size);
  const Endpoint result = Endpoint::Memory(Slot::kResult, 0);
  const Endpoint to_right =
      Endpoint::Network(patterns::RingRight(call.rank, world_size), hw::kCollectiveTag);
  if (relative == 0) {
    const Slot chunks = call.in_place ? Slot::kResult : Slot::kOp0;
    // 1. Send the chunks of relative ranks size-1 down to 1 to the right; they only read,
    //    so they all start at once and complete as the neighbour takes them.
    for (uint32_t destination = world_size - 1; destination > 0; --destination) {
      program.Copy(Endpoint::Memory(chunks, ToReal(destination, root, world_size) * n), to_right,
                   n);
    }
    // 2. Keep the root's own chunk (in place it is there already).
    if (!call.in_place) program.Copy(Endpoint::Memory(Slot::kOp0, root * n), result, n);
    return std::move(program).Finish();
  }
  const Endpoint from_left =
      Endpoint::Network(patterns::RingLeft(call.rank, world_size), hw::kCollectiveTag);
  program.SetScratch((world_size - 1 - relative) * n);
  for (uint32_t destination = world_size - 1; destination > relative; --destination) {
    // 1. Receive the chunk of a rank further on into its own scratch chunk; it starts once
    //    the previous chunk has arrived, as that chunk's forward before it waits for it.
    const Endpoint staged = Endpoint::Memory(Slot::kScratch, (destination - relative - 1) * n);
    program.Copy(from_left, staged, n);
    // 2. Forward it to the right once it is here (a hazard the builder orders).
    program.Copy(staged, to_right, n);
  }
  // 3. Receive this rank's own chunk, which comes last.
  program.Copy(from_left, result, n);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
