// Broadcast, binomial tree (patterns/binomial_tree.h): every rank but the root receives the
// whole buffer from its parent, then sends it to each of its children, largest subtree
// first, so the ranks holding the data double every message time. Cost: ceil(log2(size))
// message times of count elements each on the critical path; the root sends
// ceil(log2(size)) * count elements, and every other rank receives count elements once.
// Good for small and medium messages; large ones prefer a pipelined chain.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "firmware/program_builder.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Appends the binomial-tree broadcast steps of `rank` of `world_size` over elements
/// [0, count) of `slot`, which hold the data at `root` beforehand and at every rank after.
void AppendBcastBinomialTree(ProgramBuilder& program, uint32_t rank, uint32_t world_size,
                             uint32_t root, hw::Slot slot, uint64_t count);

/// Rank call.rank's program for broadcasting result[0, count) from call.root.
absl::StatusOr<hw::Program> GenerateBcastBinomialTree(const hw::CallDescriptor& call,
                                                      uint32_t world_size);

}  // namespace cclo::firmware
