// Reduce, ring: a pipelined chain that ends at the root. The rank after the root starts by
// sending its input to its right neighbour; each following rank adds its own input to what
// arrives from the left (into scratch) and passes the sum on to the right; the root adds its
// input last, into the result. The buffer is cut into pieces of about 64 KiB
// (ReduceRingPieces), so that every rank of the chain works on a different piece at once.
// Cost: size-1 hops; each rank sends and reduces count elements once, and inner ranks hold
// count elements of scratch. With k pieces the latency is about (size-1+k) piece times
// instead of (size-1) whole-buffer times: bandwidth-optimal for large messages, but latency
// grows linearly with size for small ones.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// The pieces the ring cuts `count` elements of `element_size` bytes into: about one per
/// 64 KiB, at least 1 and at most 256, and never more than `count` (0 pieces for count 0).
uint32_t ReduceRingPieces(uint64_t count, uint64_t element_size);

/// Rank call.rank's program reducing op0[0, count) of every rank (result[0, count) at the
/// root in place) into result[0, count) of call.root.
absl::StatusOr<hw::Program> GenerateReduceRing(const hw::CallDescriptor& call, uint32_t world_size);

}  // namespace cclo::firmware
