// Allreduce, reduce then broadcast: a binary tree reduce (reduce/reduce_binary_tree.h)
// leaves the full reduction in rank 0's result buffer, and a binomial tree broadcast
// (bcast/bcast_binomial_tree.h) hands it from there to every rank's result buffer. Every
// rank ends with bitwise the same result, computed once at rank 0.
// Cost: floor(log2(size)) hops up and ceil(log2(size)) hops down, each a whole-buffer
// message, no pipelining: every rank sends count elements up and reduces at most 2 * count;
// rank 0 sends ceil(log2(size)) * count down. Inner ranks of the reduce tree hold count
// elements of scratch. Suits small messages; the ring moves less data for large ones.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program reducing op0[0, count) (result[0, count) in place) of every
/// rank into result[0, count) of every rank.
absl::StatusOr<hw::Program> GenerateAllreduceReduceBcast(const hw::CallDescriptor& call,
                                                         uint32_t world_size);

}  // namespace cclo::firmware
