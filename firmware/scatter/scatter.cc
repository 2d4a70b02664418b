#include "firmware/scatter/scatter.h"

#include <array>

#include "firmware/scatter/scatter_one_to_all.h"
#include "firmware/scatter/scatter_ring.h"
#include "firmware/scatter/scatter_tree.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"one_to_all", hw::Collective::kScatter,
              "The root sends chunk i straight to rank i: 1 step, (size-1)*count elements "
              "leave the root.",
              "none", &GenerateScatterOneToAll},
    Algorithm{"ring", hw::Collective::kScatter,
              "Chunks travel the ring from the root, farthest first, each rank keeping its own: "
              "about size-1 chunk times, (size-1-v)*count scratch at relative rank v.",
              "none", &GenerateScatterRing},
    Algorithm{"tree", hw::Collective::kScatter,
              "Binomial tree: each child gets its whole subtree's chunks in one message: "
              "ceil(log2(size)) steps, subtree*count scratch at inner ranks.",
              "none", &GenerateScatterTree},
};

}  // namespace

absl::Span<const Algorithm> ScatterAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
