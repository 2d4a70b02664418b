#include "firmware/allgather/allgather.h"

#include <array>

namespace cclo::firmware {
namespace {

constexpr std::array<Algorithm, 0> kAlgorithms{};

}  // namespace

absl::Span<const Algorithm> AllgatherAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
