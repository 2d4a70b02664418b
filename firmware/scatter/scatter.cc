#include "firmware/scatter/scatter.h"

#include <array>

namespace cclo::firmware {
namespace {

constexpr std::array<Algorithm, 0> kAlgorithms{};

}  // namespace

absl::Span<const Algorithm> ScatterAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
