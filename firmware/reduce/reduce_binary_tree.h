// Reduce, binary tree: the ranks form a binary tree rooted at the root
// (patterns/binary_tree.h). Each rank folds the partial reductions its children send,
// straight off the network, into an accumulator together with its own input (scratch at
// inner ranks, the result at the root) and sends the accumulator to its parent; a leaf sends
// its input as it is. The children are received one after the other.
// Cost: floor(log2(size)) hops of whole-buffer messages, no pipelining: each rank
// sends count elements once and receives and reduces at most 2 * count; inner ranks hold
// count elements of scratch. Latency grows with log2(size) * count, so it suits small and
// medium messages; the root's link carries only 2 * count elements.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "firmware/program_builder.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Appends the binary tree reduce steps of `rank` of `world_size`: `count` elements from
/// `input` (a memory endpoint) of every rank are reduced into `output` (a memory endpoint,
/// equal to `input` or clear of it) of `root`. Ranks with a parent and children accumulate
/// in scratch [0, count). Returns the scratch elements this rank needs (0 or count), which
/// the caller gives the program with ProgramBuilder::SetScratch.
[[nodiscard]] uint64_t AppendReduceBinaryTree(ProgramBuilder& program, uint32_t rank,
                                              uint32_t world_size, uint32_t root,
                                              const hw::Endpoint& input, const hw::Endpoint& output,
                                              uint64_t count);

/// Rank call.rank's program reducing op0[0, count) of every rank (result[0, count) at the
/// root in place) into result[0, count) of call.root.
absl::StatusOr<hw::Program> GenerateReduceBinaryTree(const hw::CallDescriptor& call,
                                                     uint32_t world_size);

}  // namespace cclo::firmware
