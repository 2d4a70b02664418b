#include "firmware/allgather/allgather.h"

#include <array>

#include "firmware/allgather/allgather_recursive_doubling.h"
#include "firmware/allgather/allgather_ring.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"ring", hw::Collective::kAllgather,
              "Each rank passes the chunk it got last to its right neighbour: size-1 steps, "
              "(size-1)*count elements sent per rank.",
              "none", &GenerateAllgatherRing},
    Algorithm{"recursive_doubling", hw::Collective::kAllgather,
              "Partners 2^k apart in the core swap all they have gathered: log2(size) steps "
              "(two more when size is not a power of two), about (size-1)*count elements sent "
              "per rank.",
              "none; worlds that are not a power of two fold their low pairs",
              &GenerateAllgatherRecursiveDoubling},
};

}  // namespace

absl::Span<const Algorithm> AllgatherAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
