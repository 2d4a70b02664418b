// Alltoall, linear: every rank posts all its transfers at once: for every other rank j it
// receives chunk j of the result from j and sends chunk j of its input to j, in the order
// rank+1, rank+2, ... (mod size) so that the ranks do not all start at the same peer; its
// own chunk is a local copy. In place the input sits in the result buffer, which receives
// the output, so it is copied to scratch first and sent from there (its own chunk stays).
// Cost: one step; each rank sends and receives (size-1) * count elements in size-1
// messages each way, all in flight together; plus a local copy of count elements, or of
// size*count in place. Lowest latency; for large worlds many messages compete at once.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program sending op0[j*count, (j+1)*count) to every rank j, which
/// receives it at result[rank*count, (rank+1)*count) (in place: the input is the result).
absl::StatusOr<hw::Program> GenerateAlltoallLinear(const hw::CallDescriptor& call,
                                                   uint32_t world_size);

}  // namespace cclo::firmware
