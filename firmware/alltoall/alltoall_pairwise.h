// Alltoall, pairwise (patterns/pairwise.h): after its own chunk is copied into place, in
// step s (1 .. size-1) rank r receives chunk r-s of the result from rank r-s and sends chunk
// r+s of its input to rank r+s; a step starts once both transfers of the step before have
// completed, so each rank has one message in flight each way. In place the input sits in
// the result buffer, which receives the output, so it is copied to scratch first and sent
// from there (its own chunk stays). Cost: size-1 steps of count elements each way,
// (size-1) * count elements sent per rank; plus a local copy of count elements, or of
// size*count in place. Latency grows linearly with size; gentle on the network for large
// messages and large worlds.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program sending op0[j*count, (j+1)*count) to every rank j, which
/// receives it at result[rank*count, (rank+1)*count) (in place: the input is the result).
absl::StatusOr<hw::Program> GenerateAlltoallPairwise(const hw::CallDescriptor& call,
                                                     uint32_t world_size);

}  // namespace cclo::firmware
