// Scatter, one to all: the root sends chunk i of op0 (count elements at i*count) straight to
// rank i, all at once, and copies its own chunk into its result (in place it stays where it
// is); every other rank receives its chunk into its result. Cost: the root sends
// (size-1) * count elements in size-1 messages; latency is one message time, bandwidth is
// bound by the root's link. Good for small messages and small worlds.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Rank call.rank's program for scattering the root's op0 (in place: result) chunks.
absl::StatusOr<hw::Program> GenerateScatterOneToAll(const hw::CallDescriptor& call,
                                                    uint32_t world_size);

}  // namespace cclo::firmware
