// Allreduce, recursive doubling: in step k every rank of a power-of-two core swaps its whole
// buffer with the rank whose core number differs in bit k and reduces what it got into its
// result; after log2(p) steps every core rank holds the full reduction. While what it
// sends is its untouched input (step 0 of a rank without a fold partner, not in place), it
// reduces the partner's as it arrives; once it sends its result, it receives into scratch
// first. A world that is not a power of two is folded first
// (patterns/recursive_doubling.h): the even rank of each low pair hands its input to its
// odd partner, which reduces it into its own before the core starts, sits out, and gets
// the result back at the end. Partners reduce the same two values in the same order (the
// lower core ranks' first), so every rank ends with the same bits, even for ops that are
// commutative in value but not in bits (max and min of +0 and -0, NaN payloads).
// Cost: log2(p) steps of count elements each: log2(p) * count elements sent and reduced per
// core rank, plus two more whole-buffer messages for folded pairs; count elements of
// scratch unless the only step is from the input. Lowest latency for small messages; for
// large ones the ring sends less.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program reducing op0[0, count) (result[0, count) in place) of every
/// rank into result[0, count) of every rank.
absl::StatusOr<hw::Program> GenerateAllreduceRecursiveDoubling(const hw::CallDescriptor& call,
                                                               uint32_t world_size);

}  // namespace cclo::firmware
