// Allreduce, ring: a reduce-scatter ring from the input (op0, or the result in place) into
// the result buffer leaves the full reduction of chunk r at rank r, and an allgather ring
// circulates the reduced chunks to every rank (reduce_scatter_ring.h, allgather_ring.h).
// Every rank ends with bitwise the same result, because each chunk is reduced once, in
// ring order, and then copied. Cost: 2(size-1) steps of count/size elements: 2(size-1)/size
// * count elements sent and (size-1)/size * count reduced per rank, no local copy (one of
// count elements on 1 rank); latency grows linearly with size. Bandwidth-optimal for large
// messages.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program reducing op0[0, count) of every rank into result[0, count) of
/// every rank.
absl::StatusOr<hw::Program> GenerateAllreduceRing(const hw::CallDescriptor& call,
                                                  uint32_t world_size);

}  // namespace cclo::firmware
