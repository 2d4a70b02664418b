#include "firmware/allreduce/allreduce.h"

#include <array>

#include "firmware/allreduce/allreduce_recursive_doubling.h"
#include "firmware/allreduce/allreduce_reduce_bcast.h"
#include "firmware/allreduce/allreduce_ring.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"ring", hw::Collective::kAllreduce,
              "Reduce-scatter ring then allgather ring over result: 2(size-1) steps, "
              "2(size-1)/size*count elements sent per rank.",
              "none; counts need not divide by the world size", &GenerateAllreduceRing},
    Algorithm{"recursive_doubling", hw::Collective::kAllreduce,
              "Swap and reduce the whole buffer with the partner of each of log2(p) steps, "
              "non-power-of-two worlds folded onto p ranks: log2(p)*count elements per rank.",
              "none; count elements of scratch", &GenerateAllreduceRecursiveDoubling},
    Algorithm{"reduce_bcast", hw::Collective::kAllreduce,
              "Binary tree reduce to rank 0, then binomial tree bcast from rank 0: about "
              "2*log2(size) hops of count elements.",
              "none; inner ranks of the reduce tree hold count elements of scratch",
              &GenerateAllreduceReduceBcast},
};

}  // namespace

absl::Span<const Algorithm> AllreduceAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
