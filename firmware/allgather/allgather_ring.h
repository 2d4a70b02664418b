// Allgather, ring, in place: the buffer is cut into `size` chunks (patterns::RingChunk) and
// rank r starts with chunk r. In step s (0 .. size-2) rank r receives chunk r-s-1 from its
// left neighbour and sends chunk r-s, which it owns or received in the step before, to its
// right neighbour. Cost: size-1 steps of count/size elements each, (size-1)/size * count
// elements sent per rank; latency grows linearly with size. Chunks of 0 elements are
// skipped on both sides.
#pragma once

#include <cstdint>

#include "firmware/program_builder.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Appends the allgather ring steps of `rank` of `world_size` over elements [0, count) of
/// `slot`, where patterns::RingChunk(count, world_size, rank) holds this rank's chunk.
/// Afterwards every chunk holds its owner's data.
void AppendAllgatherRing(ProgramBuilder& program, uint32_t rank, uint32_t world_size, hw::Slot slot,
                         uint64_t count);

}  // namespace cclo::firmware
