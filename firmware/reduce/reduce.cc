#include "firmware/reduce/reduce.h"

#include <array>

namespace cclo::firmware {
namespace {

constexpr std::array<Algorithm, 0> kAlgorithms{};

}  // namespace

absl::Span<const Algorithm> ReduceAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
