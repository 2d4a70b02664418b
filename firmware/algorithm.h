// What every collective algorithm offers the registry: a pure generator from a call and the
// communicator's size to the calling rank's Program.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"
#include "hw/types.h"

namespace cclo::firmware {

/// Emits the Program of rank `call.rank` of `world_size` ranks. The call has passed
/// ValidateCall (registry.h); every rank of the communicator generates from the same
/// fields apart from its rank, so the programs fit together.
using Generator = absl::StatusOr<hw::Program> (*)(const hw::CallDescriptor& call,
                                                  uint32_t world_size);

/// One entry of the registry.
struct Algorithm {
  std::string_view name;         ///< unique per collective, e.g. "ring"
  hw::Collective collective;     ///< the collective it implements
  std::string_view description;  ///< how it works and what it costs, one line
  std::string_view constraints;  ///< world sizes and counts it supports
  Generator generate;
};

}  // namespace cclo::firmware
