// Broadcast, one to all: the root sends its result buffer to every other rank in rank
// order; every other rank receives it into its result buffer. Cost: the root sends
// (size-1) * count elements in size-1 messages, all started at once; latency is one message
// time, bandwidth is bound by the root's link. Good for small messages and small worlds.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program for broadcasting result[0, count) from call.root.
absl::StatusOr<hw::Program> GenerateBcastOneToAll(const hw::CallDescriptor& call,
                                                  uint32_t world_size);

}  // namespace cclo::firmware
