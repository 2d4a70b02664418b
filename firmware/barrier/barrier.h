// The barrier algorithms: the table the registry lists, the default first.
#pragma once

#include "absl/types/span.h"
#include "firmware/algorithm.h"

namespace cclo::firmware {

/// Every barrier algorithm, in the order the registry lists them.
absl::Span<const Algorithm> BarrierAlgorithms();

}  // namespace cclo::firmware
