#include "firmware/gather/gather_ring.h"

#include <utility>

#include "firmware/patterns/binomial_tree.h"
#include "firmware/patterns/ring.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateGatherRing(const hw::CallDescriptor& call,
                                               uint32_t world_size) {
  ProgramBuilder program("ring");
  const uint64_t n = call.count;
  if (n == 0) return std::move(program).Finish();
  const uint32_t root = call.root;
  const uint32_t relative = patterns::ToRelative(call.rank, root, world_size);
  const Endpoint input = Endpoint::Memory(Slot::kOp0, 0);
  const Endpoint from_right =
      Endpoint::Network(patterns::RingRight(call.rank, world_size), hw::kCollectiveTag);
  if (relative == 0) {
    // 1. Receive the chunks of relative ranks 1 .. size-1 straight into place; they are
    //    disjoint, so every receive is posted at once.
    for (uint32_t source = 1; source < world_size; ++source) {
      program.Copy(from_right,
                   Endpoint::Memory(Slot::kResult, patterns::ToReal(source, root, world_size) * n),
                   n);
    }
    // 2. Put the root's own contribution in place (in place it is there already).
    if (!call.in_place) program.Copy(input, Endpoint::Memory(Slot::kResult, root * n), n);
    return std::move(program).Finish();
  }
  const Endpoint to_left =
      Endpoint::Network(patterns::RingLeft(call.rank, world_size), hw::kCollectiveTag);
  program.SetScratch((world_size - 1 - relative) * n);
  // 1. Send this rank's own contribution first.
  program.Copy(input, to_left, n);
  for (uint32_t source = relative + 1; source < world_size; ++source) {
    // 2. Receive the chunk of a rank further out into its own scratch chunk; it starts once
    //    the previous chunk has arrived, as that chunk's forward before it waits for it.
    const Endpoint staged = Endpoint::Memory(Slot::kScratch, (source - relative - 1) * n);
    program.Copy(from_right, staged, n);
    // 3. Forward it to the left once it is here (a hazard the builder orders).
    program.Copy(staged, to_left, n);
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
