// Reduce-scatter, ring: the buffer is cut into `size` chunks (patterns::RingChunk). In step s
// (0 .. size-2) rank r receives chunk r-s-2 from its left neighbour and reduces it with its
// own input of that chunk, and sends chunk r-s-1 to its right neighbour: its own input at
// step 0, then the chunk it reduced in the step before. After size-1 steps rank r holds
// the reduction of chunk r over all ranks. Cost: size-1 steps of count/size elements each,
// so (size-1)/size * count elements sent and reduced per rank; latency grows linearly with
// size. Chunks of 0 elements are skipped on both sides. Nothing is copied up front.
//
// The reduce_scatter collective ("ring") runs these steps over all size*count input
// elements, whose ring chunks are then exactly the contract's chunks of `count` elements.
// Not in place, the input op0 stays unchanged, partial chunks go to scratch (size*count
// elements, none on 2 ranks) and chunk `rank` is reduced straight into result[0, count).
// In place the input is the result buffer, which the ring overwrites, and chunk `rank` is
// copied to its start. Cost: size-1 steps of count elements, (size-1) * count elements
// sent and reduced per rank, plus, in place, a local copy of count elements.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "firmware/program_builder.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Appends the reduce-scatter ring steps of `rank` of `world_size` over elements
/// [0, count): this rank's contribution is read from `input`, partial results go to the
/// same elements of `work` (which may be `input`: in place), and the full reduction of
/// patterns::RingChunk(count, world_size, rank) goes to `out`, or to that chunk of `work`
/// when `out` is empty. Nothing is copied up front: the first step sends and reduces
/// straight from `input`. Other chunks of `work` hold partial results or nothing.
void AppendReduceScatterRing(ProgramBuilder& program, uint32_t rank, uint32_t world_size,
                             hw::Slot input, hw::Slot work, uint64_t count,
                             std::optional<hw::Endpoint> out);

/// Rank call.rank's program reducing chunk r = [r*count, (r+1)*count) of op0 over every
/// rank into result[0, count) of rank r (in place: the input is result[0, size*count)).
absl::StatusOr<hw::Program> GenerateReduceScatterRing(const hw::CallDescriptor& call,
                                                      uint32_t world_size);

}  // namespace cclo::firmware
