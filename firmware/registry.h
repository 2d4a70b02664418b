// The table of every collective algorithm, the default choice per collective, and the one
// entry point that turns a call into the calling rank's Program.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "firmware/algorithm.h"
#include "hw/call.h"
#include "hw/program.h"
#include "hw/types.h"

namespace cclo::firmware {

/// Every algorithm, grouped by collective (the per-collective tables in firmware/<collective>/).
absl::Span<const Algorithm> AllAlgorithms();

/// The algorithm `name` of `collective`, or nullptr.
const Algorithm* Find(hw::Collective collective, std::string_view name);

/// The algorithms of `collective`, in table order; empty for an unknown collective.
std::vector<const Algorithm*> ForCollective(hw::Collective collective);

/// `algorithm`'s place in its collective's table, from 1 (hw::Program::algorithm_place).
uint8_t PlaceOf(const Algorithm& algorithm);
/// How many algorithms `collective`'s table has: its places are 1 to this (counted without
/// ForCollective's vector: an engine asks for every message that arrives).
uint8_t PlacesIn(hw::Collective collective);
/// The name of the algorithm at `place` in `collective`'s table; "algorithm <place>" where
/// there is none (an engine refuses a message naming such a place as it arrives).
std::string NameAt(hw::Collective collective, uint8_t place);

/// Which built-in default selection (selection.cc) this build has. Every rank of a
/// communicator must choose alike, so daemons of different selections refuse to join one;
/// any change to the rules takes the next number, and so does any change to the order of
/// the algorithm tables, whose places the messages carry (PlaceOf).
inline constexpr uint32_t kSelectionVersion = 1;

/// The algorithm used when a call names none: the built-in default selection
/// (selection.cc) by `bytes` (one rank's contribution, count times datatype size) and
/// `world_size`. `collective` must be one of hw::Collective's enumerators (each has at
/// least one algorithm).
const Algorithm& DefaultFor(hw::Collective collective, uint64_t bytes, uint32_t world_size);

/// Checks the call's fields against the communicator size: world_size >= 1, rank <
/// world_size, a known collective, datatype and reduce op; rooted collectives (hw::HasRoot):
/// root < world_size; in_place only where hw::HasInPlace holds, and for rooted
/// collectives only at the root;
/// send/recv: peer < world_size, tag != hw::kCollectiveTag. INVALID_ARGUMENT
/// naming the field and its value otherwise.
absl::Status ValidateCall(const hw::CallDescriptor& call, uint32_t world_size);

/// Validates the call, then generates its Program with call.algorithm if set (an unknown
/// name is INVALID_ARGUMENT listing the valid names for the collective), else with
/// DefaultFor, and records the algorithm's place in it. A nop yields an empty program.
absl::StatusOr<hw::Program> Generate(const hw::CallDescriptor& call, uint32_t world_size);

}  // namespace cclo::firmware
