// Broadcast, pipelined chain: the ranks form the chain root -> root+1 -> ... -> root-1
// (mod size) and the buffer is cut into pieces of about 64 KiB (BcastChainPieces). The root
// sends every piece to its right neighbour at once; every other rank receives piece k from
// its left neighbour and forwards it to the right as soon as it has it, while it receives
// piece k+1. Cost: every rank but the last sends count elements once; the time is about
// (pieces + size - 2) piece times, so for large buffers close to one buffer time whatever
// the size, while the latency of a small buffer grows linearly with size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// How many pieces the chain cuts `count` elements of `element_size` bytes into: one per
/// started 64 KiB, at least 1 and at most 64, never more than `count` (0 for count 0).
uint32_t BcastChainPieces(uint64_t count, size_t element_size);

/// Rank call.rank's program for broadcasting result[0, count) from call.root.
absl::StatusOr<hw::Program> GenerateBcastChain(const hw::CallDescriptor& call, uint32_t world_size);

}  // namespace cclo::firmware
