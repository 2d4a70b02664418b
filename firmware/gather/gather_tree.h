// Gather, binomial tree (patterns/binomial_tree.h): the mirror image of scatter tree. A
// leaf sends its op0 to its parent. An inner rank copies its op0 into the first chunk of a
// scratch area for its subtree, receives from each child the chunks of the child's whole
// subtree in one message into place there, and once all have arrived sends the whole area,
// ordered by relative rank, to its parent in one message. The root receives each child's
// message straight into its result, except for the one subtree whose chunks wrap past rank
// size-1, which it receives into scratch and copies into place after every receive is
// posted; it copies its own op0 into chunk `root` (in place it is there already). Cost:
// ceil(log2(size)) message times on the critical path; the root receives (size-1) * count
// elements, an inner rank sends subtree * count and holds as much scratch.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program for gathering every rank's op0 into the root's result.
absl::StatusOr<hw::Program> GenerateGatherTree(const hw::CallDescriptor& call, uint32_t world_size);

}  // namespace cclo::firmware
