// Barrier, dissemination (patterns/dissemination.h): in round k (0 .. ceil(log2 size)-1)
// rank r sends an empty message to rank r+2^k and receives one from rank r-2^k (mod size).
// A round starts only once the previous round's message has arrived, so the message of
// round k tells its receiver that the 2^(k+1)-1 ranks before it have entered the barrier,
// and no rank leaves before every rank has entered. The messages carry no data: a send is a
// copy of zero elements and a receive discards. Cost: ceil(log2 size) rounds of one empty
// message each way per rank; works for any size.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program for a barrier among `world_size` ranks; uses no buffers.
absl::StatusOr<hw::Program> GenerateBarrierDissemination(const hw::CallDescriptor& call,
                                                         uint32_t world_size);

}  // namespace cclo::firmware
