#include "firmware/barrier/barrier.h"

#include <array>

namespace cclo::firmware {
namespace {

constexpr std::array<Algorithm, 0> kAlgorithms{};

}  // namespace

absl::Span<const Algorithm> BarrierAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
