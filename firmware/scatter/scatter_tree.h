// Scatter, binomial tree (patterns/binomial_tree.h): the root sends each child, largest
// subtree first, the chunks of the child's whole subtree in one message, ordered by
// relative rank. A child receives that message into scratch, sends each of its own
// children the part for that child's subtree, and copies its own chunk (the first) into its
// result; a leaf receives its chunk straight into its result. The root sends from op0 (in
// place: result) directly, except for the one subtree whose chunks wrap past rank size-1,
// which it first gathers into scratch; it keeps its own chunk by a local copy (in place it
// stays where it is). Cost: ceil(log2(size)) message times on the critical path; the root
// sends (size-1) * count elements, an inner rank forwards (subtree-1) * count and holds
// subtree * count elements of scratch.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program for scattering the root's op0 (in place: result) chunks.
absl::StatusOr<hw::Program> GenerateScatterTree(const hw::CallDescriptor& call,
                                                uint32_t world_size);

}  // namespace cclo::firmware
