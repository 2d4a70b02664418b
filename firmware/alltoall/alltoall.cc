#include "firmware/alltoall/alltoall.h"

#include <array>

namespace cclo::firmware {
namespace {

constexpr std::array<Algorithm, 0> kAlgorithms{};

}  // namespace

absl::Span<const Algorithm> AlltoallAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
