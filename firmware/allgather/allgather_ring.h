// Allgather, ring, in place: the buffer is cut into `size` chunks (patterns::RingChunk) and
// rank r starts with chunk r. In step s (0 .. size-2) rank r receives chunk r-s-1 from its
// left neighbour and sends chunk r-s, which it owns or received in the step before, to its
// right neighbour. Cost: size-1 steps of count/size elements each, (size-1)/size * count
// elements sent per rank; latency grows linearly with size. Chunks of 0 elements are
// skipped on both sides.
//
// The allgather collective ("ring") copies op0 into chunk `rank` of the result (already
// there in place) and runs these steps over all size*count elements of the result, whose
// ring chunks are then exactly the contract's chunks of `count` elements. Cost: size-1 steps
// of count elements, (size-1) * count elements sent per rank, plus one local copy of count.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "firmware/program_builder.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Appends the allgather ring steps of `rank` of `world_size` over elements [0, count) of
/// `slot`, where patterns::RingChunk(count, world_size, rank) holds this rank's chunk.
/// Afterwards every chunk holds its owner's data.
void AppendAllgatherRing(ProgramBuilder& program, uint32_t rank, uint32_t world_size, hw::Slot slot,
                         uint64_t count);

/// Rank call.rank's program gathering op0[0, count) of every rank r into
/// result[r*count, (r+1)*count) of every rank (in place: already at chunk call.rank).
absl::StatusOr<hw::Program> GenerateAllgatherRing(const hw::CallDescriptor& call,
                                                  uint32_t world_size);

}  // namespace cclo::firmware
