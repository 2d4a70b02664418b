#include "firmware/alltoall/alltoall_pairwise.h"

#include <utility>
#include <vector>

#include "firmware/patterns/pairwise.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateAlltoallPairwise(const hw::CallDescriptor& call,
                                                     uint32_t world_size) {
  ProgramBuilder program("pairwise");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const uint32_t rank = call.rank;
  auto chunk = [count](Slot slot, uint32_t index) {
    return Endpoint::Memory(slot, uint64_t{index} * count);
  };
  // 1. The input: op0, whose own chunk is copied into place; in place a copy of the result
  //    in scratch if there are other ranks to send to, while its own chunk stays in place.
  Slot input = Slot::kOp0;
  if (!call.in_place) {
    program.Copy(chunk(input, rank), chunk(Slot::kResult, rank), count);
  } else if (world_size > 1) {
    input = Slot::kScratch;
    program.SetScratch(uint64_t{world_size} * count);
    program.Copy(chunk(Slot::kResult, 0), chunk(input, 0), uint64_t{world_size} * count);
  }
  // 2. Step s: receive from rank-s and send to rank+s, once both moves of step s-1 are done.
  std::vector<uint32_t> previous;
  for (uint32_t step = 1; step <= patterns::PairwiseSteps(world_size); ++step) {
    const uint32_t from = patterns::PairwiseFrom(rank, step, world_size);
    const uint32_t to = patterns::PairwiseTo(rank, step, world_size);
    const uint32_t receive = program.Copy(Endpoint::Network(from, hw::kCollectiveTag),
                                          chunk(Slot::kResult, from), count, previous);
    const uint32_t send =
        program.Copy(chunk(input, to), Endpoint::Network(to, hw::kCollectiveTag), count, previous);
    previous = {receive, send};
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
