// Send and receive, direct: one move each. The sender puts its op0 buffer on the network to
// the peer; the receiver takes the matching message (same tag, in order) into its result
// buffer. Cost: one message of count elements; a message is sent even for count 0, so every
// send matches exactly one receive.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// The sending rank's program: op0[0, count) to call.peer with call.tag.
absl::StatusOr<hw::Program> GenerateSendDirect(const hw::CallDescriptor& call, uint32_t world_size);

/// The receiving rank's program: from call.peer with call.tag into result[0, count).
absl::StatusOr<hw::Program> GenerateRecvDirect(const hw::CallDescriptor& call, uint32_t world_size);

}  // namespace cclo::firmware
