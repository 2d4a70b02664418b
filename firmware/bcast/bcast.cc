#include "firmware/bcast/bcast.h"

#include <array>

#include "firmware/bcast/bcast_one_to_all.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"one_to_all", hw::Collective::kBcast,
              "The root sends result to every other rank: 1 step, (size-1)*count elements "
              "leave the root.",
              "none", &GenerateBcastOneToAll},
};

}  // namespace

absl::Span<const Algorithm> BcastAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
