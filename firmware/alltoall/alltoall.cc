#include "firmware/alltoall/alltoall.h"

#include <array>

#include "firmware/alltoall/alltoall_linear.h"
#include "firmware/alltoall/alltoall_pairwise.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"linear", hw::Collective::kAlltoall,
              "Every rank posts all its sends and receives at once: 1 step, size-1 messages of "
              "count elements each way in flight together.",
              "none; in place uses size*count scratch", &GenerateAlltoallLinear},
    Algorithm{"pairwise", hw::Collective::kAlltoall,
              "In step s rank r sends to r+s and receives from r-s: size-1 steps of one "
              "message of count elements each way.",
              "none; in place uses size*count scratch", &GenerateAlltoallPairwise},
};

}  // namespace

absl::Span<const Algorithm> AlltoallAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
