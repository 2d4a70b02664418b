// Reduce-scatter, ring, in place: the buffer is cut into `size` chunks (patterns::RingChunk).
// In step s (0 .. size-2) rank r receives chunk r-s-2 from its left neighbour and reduces it
// into its own copy, and sends chunk r-s-1, which it reduced in the step before, to its
// right neighbour. After size-1 steps chunk r of rank r holds the reduction over all ranks.
// Cost: size-1 steps of count/size elements each, so (size-1)/size * count elements sent
// and reduced per rank; latency grows linearly with size. Chunks of 0 elements are skipped
// on both sides.
#pragma once

#include <cstdint>

#include "firmware/program_builder.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Appends the reduce-scatter ring steps of `rank` of `world_size` over elements
/// [0, count) of `slot`, which must already hold this rank's contribution. Afterwards
/// patterns::RingChunk(count, world_size, rank) of `slot` holds the full reduction; the
/// other chunks hold partial results.
void AppendReduceScatterRing(ProgramBuilder& program, uint32_t rank, uint32_t world_size,
                             hw::Slot slot, uint64_t count);

}  // namespace cclo::firmware
