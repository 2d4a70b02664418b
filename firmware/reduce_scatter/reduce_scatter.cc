#include "firmware/reduce_scatter/reduce_scatter.h"

#include <array>

#include "firmware/reduce_scatter/reduce_scatter_ring.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"ring", hw::Collective::kReduceScatter,
              "Partial chunks travel right and are reduced on the way: size-1 steps, "
              "(size-1)*count elements sent and reduced per rank.",
              "none; size*count scratch unless in place", &GenerateReduceScatterRing},
};

}  // namespace

absl::Span<const Algorithm> ReduceScatterAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
