// Gather, all to one: every rank but the root sends its op0 to the root, which receives
// chunk i straight into result at i*count, all receives posted at once, and copies its own
// op0 into chunk `root` (in place it is there already). Cost: the root receives
// (size-1) * count elements in size-1 messages; latency is one message time, bandwidth is
// bound by the root's link. Good for small messages and small worlds.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program for gathering every rank's op0 into the root's result.
absl::StatusOr<hw::Program> GenerateGatherAllToOne(const hw::CallDescriptor& call,
                                                   uint32_t world_size);

}  // namespace cclo::firmware
