// Scatter, ring: the chunks travel along the ring root -> root+1 -> ... -> root-1 (mod
// size), farthest destination first. The root sends the chunks of relative ranks size-1,
// size-2, ..., 1 to its right neighbour, one message each; relative rank v receives the
// chunks of size-1 .. v+1 into scratch and forwards each as soon as it has it, then
// receives its own chunk straight into its result. The root keeps its own chunk by a local
// copy (in place it stays where it is). Cost: the root sends (size-1) * count elements,
// relative rank v forwards (size-1-v) * count and holds as much scratch; the pipeline takes
// about size-1 chunk times plus size-2 latencies. Every link carries at most one chunk at a
// time, so it suits networks where the root's link is no faster than the others.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program for scattering the root's op0 (in place: result) chunks.
absl::StatusOr<hw::Program> GenerateScatterRing(const hw::CallDescriptor& call,
                                                uint32_t world_size);

}  // namespace cclo::firmware
