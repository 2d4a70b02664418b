#include "firmware/allreduce/allreduce.h"

#include <array>

#include "firmware/allreduce/allreduce_ring.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"ring", hw::Collective::kAllreduce,
              "Reduce-scatter ring then allgather ring over result: 2(size-1) steps, "
              "2(size-1)/size*count elements sent per rank.",
              "none; counts need not divide by the world size", &GenerateAllreduceRing},
};

}  // namespace

absl::Span<const Algorithm> AllreduceAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
