#include "firmware/reduce/reduce.h"

#include <array>

#include "firmware/reduce/reduce_all_to_one.h"
#include "firmware/reduce/reduce_binary_tree.h"
#include "firmware/reduce/reduce_ring.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"all_to_one", hw::Collective::kReduce,
              "Every rank sends its input to the root, which receives all at once, reducing the "
              "first with its input as it arrives and the others from scratch: one step, "
              "(size-1)*count elements into the root.",
              "none; the root holds (size-2)*count elements of scratch", &GenerateReduceAllToOne},
    Algorithm{"binary_tree", hw::Collective::kReduce,
              "Each rank reduces its children's partial results with its input and sends them "
              "to its parent: floor(log2(size)) hops of count elements.",
              "none; inner ranks hold count elements of scratch", &GenerateReduceBinaryTree},
    Algorithm{"ring", hw::Collective::kReduce,
              "Pipelined chain ending at the root, in pieces of up to 64 KiB (at most 256): "
              "size-1 hops, count elements sent and reduced per rank.",
              "none; ranks between the chain's ends hold count elements of scratch",
              &GenerateReduceRing},
};

}  // namespace

absl::Span<const Algorithm> ReduceAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
