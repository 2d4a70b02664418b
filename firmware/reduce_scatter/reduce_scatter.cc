#include "firmware/reduce_scatter/reduce_scatter.h"

#include <array>

namespace cclo::firmware {
namespace {

constexpr std::array<Algorithm, 0> kAlgorithms{};

}  // namespace

absl::Span<const Algorithm> ReduceScatterAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
