// Reduce, all to one: every rank but the root sends its whole input to the root in one
// message; the root posts a receive for each of them at once: the first it reduces with its
// own input into the result as it arrives, the others land each in its own chunk of
// scratch and are folded into the result one by one after it.
// Cost: one step; the root receives (size-1) * count elements over its one link and reduces
// (size-1) * count elements, and holds (size-2) * count elements of scratch; every other
// rank sends count elements. Good for small messages and few ranks; the root's link is the
// bottleneck for large ones.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program reducing op0[0, count) of every rank (result[0, count) at the
/// root in place) into result[0, count) of call.root.
absl::StatusOr<hw::Program> GenerateReduceAllToOne(const hw::CallDescriptor& call,
                                                   uint32_t world_size);

}  // namespace cclo::firmware
