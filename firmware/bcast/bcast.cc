#include "firmware/bcast/bcast.h"

#include <array>

#include "firmware/bcast/bcast_binomial_tree.h"
#include "firmware/bcast/bcast_chain.h"
#include "firmware/bcast/bcast_one_to_all.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"one_to_all", hw::Collective::kBcast,
              "The root sends result to every other rank: 1 step, (size-1)*count elements "
              "leave the root.",
              "none", &GenerateBcastOneToAll},
    Algorithm{"binomial_tree", hw::Collective::kBcast,
              "Each rank receives from its parent in a binomial tree, then sends to its children, "
              "largest subtree first: ceil(log2(size)) steps of count elements.",
              "none", &GenerateBcastBinomialTree},
    Algorithm{"chain", hw::Collective::kBcast,
              "Pieces of up to 64 KiB (at most 64) flow root -> root+1 -> ... and each rank "
              "forwards piece k while it receives piece k+1: about pieces + size - 2 piece times.",
              "none", &GenerateBcastChain},
};

}  // namespace

absl::Span<const Algorithm> BcastAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
