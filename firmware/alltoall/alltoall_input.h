// What the alltoall algorithms share: the chunks of a buffer, and the buffer the chunks
// are sent from.
#pragma once

#include <cstdint>

#include "firmware/program_builder.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Chunk `index`, of `count` elements, of the buffer in `slot`.
hw::Endpoint AlltoallChunk(hw::Slot slot, uint32_t index, uint64_t count);

/// Step 1 of an alltoall with call.count > 0: out of place, the rank's own chunk of op0 is
/// copied into place and op0 is sent from; in place, the result is copied to scratch,
/// which is sent from, if there are other ranks (the rank's own chunk stays in place).
/// Returns the slot the chunks are sent from.
hw::Slot PlaceAlltoallInput(ProgramBuilder& program, const hw::CallDescriptor& call,
                            uint32_t world_size);

}  // namespace cclo::firmware
