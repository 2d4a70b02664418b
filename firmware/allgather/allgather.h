// The allgather algorithms: the table the registry lists, the default first.
#pragma once

#include "absl/types/span.h"
#include "firmware/algorithm.h"

namespace cclo::firmware {

/// Every allgather algorithm, in the order the registry lists them.
absl::Span<const Algorithm> AllgatherAlgorithms();

}  // namespace cclo::firmware
