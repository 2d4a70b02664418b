// The bcast algorithms: the table the registry lists, the default first.
#pragma once

#include "absl/types/span.h"
#include "firmware/algorithm.h"

namespace cclo::firmware {

/// Every bcast algorithm, in the order the registry lists them.
absl::Span<const Algorithm> BcastAlgorithms();

}  // namespace cclo::firmware
