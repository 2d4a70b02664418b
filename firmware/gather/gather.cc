#include "firmware/gather/gather.h"

#include <array>

#include "firmware/gather/gather_all_to_one.h"
#include "firmware/gather/gather_ring.h"
#include "firmware/gather/gather_tree.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"all_to_one", hw::Collective::kGather,
              "Every rank sends its chunk straight to the root: 1 step, (size-1)*count "
              "elements arrive at the root.",
              "none", &GenerateGatherAllToOne},
    Algorithm{"ring", hw::Collective::kGather,
              "Chunks travel the ring towards the root, nearest first, each rank adding its own: "
              "about size-1 chunk times, (size-1-v)*count scratch at relative rank v.",
              "none", &GenerateGatherRing},
    Algorithm{"tree", hw::Collective::kGather,
              "Binomial tree: each child sends its whole subtree's chunks in one message: "
              "ceil(log2(size)) steps, subtree*count scratch at inner ranks.",
              "none", &GenerateGatherTree},
};

}  // namespace

absl::Span<const Algorithm> GatherAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
