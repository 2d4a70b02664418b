// Gather, ring: the mirror image of scatter ring. The chunks travel along the ring
// root-1 -> root-2 -> ... -> root (towards the root, mod size), nearest source first:
// relative rank v sends its own op0 to relative v-1, then receives the chunks of relative
// ranks v+1 .. size-1 from relative v+1 into scratch and forwards each as soon as it has
// it. The root receives the chunks of relative ranks 1 .. size-1 straight into place and
// copies its own op0 into chunk `root` (in place it is there already). Cost: the root
// receives (size-1) * count elements, relative rank v forwards (size-1-v) * count and holds
// as much scratch; the pipeline takes about size-1 chunk times plus size-2 latencies, and
// every link carries at most one chunk at a time.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program for gathering every rank's op0 into the root's result.
absl::StatusOr<hw::Program> GenerateGatherRing(const hw::CallDescriptor& call, uint32_t world_size);

}  // namespace cclo::firmware
