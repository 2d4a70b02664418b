// Allgather, recursive doubling (patterns/recursive_doubling.h): after the contribution is in
// chunk `rank` of the result, a world that is not a power of two folds first: the even rank
// of each low pair (2i, 2i+1) sends its chunk to its odd partner and sits out. In step k of
// the core the ranks whose core numbers differ in bit k swap everything they have gathered
// so far, so the gathered part doubles each step. Finally each odd paired rank sends the
// whole result back to its even partner.
//
// A core rank's chunks (its own, plus its even partner's when paired) are adjacent, and core
// ranks follow real ranks in order, so an aligned group of 2^k core ranks covers one
// contiguous range of chunks: each step is one message each way.
//
// Cost with p the largest power of two not above size: log2(p) steps, the k-th carrying
// the 2^k core blocks gathered so far, so about (size-1) * count elements sent per core
// rank; a world that is not a power of two adds two steps (count, then size*count elements)
// at the paired ranks. Latency grows with log2(size): good for small messages.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program gathering op0[0, count) of every rank r into
/// result[r*count, (r+1)*count) of every rank (in place: already at chunk call.rank).
absl::StatusOr<hw::Program> GenerateAllgatherRecursiveDoubling(const hw::CallDescriptor& call,
                                                               uint32_t world_size);

}  // namespace cclo::firmware
