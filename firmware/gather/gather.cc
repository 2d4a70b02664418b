#include "firmware/gather/gather.h"

#include <array>

namespace cclo::firmware {
namespace {

constexpr std::array<Algorithm, 0> kAlgorithms{};

}  // namespace

absl::Span<const Algorithm> GatherAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
