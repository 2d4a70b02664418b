#include "firmware/alltoall/alltoall_pairwise.h"

#include <utility>
#include <vector>

#include "firmware/alltoall/alltoall_input.h"
#include "firmware/patterns/pairwise.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateAlltoallPairwise(const hw::CallDescriptor& call,
                                                     uint32_t world_size) {
  ProgramBuilder program("pairwise");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const uint32_t rank = call.rank;
  // 1. The input: op0, or in place a copy of the result in scratch (alltoall_input.h).
  const Slot input = PlaceAlltoallInput(program, call, world_size);
  // 2. Step s: receive from rank-s and send to rank+s, once both moves of step s-1 are done.
  std::vector<uint32_t> previous;
  for (uint32_t step = 1; step <= patterns::PairwiseSteps(world_size); ++step) {
    const uint32_t from = patterns::PairwiseFrom(rank, step, world_size);
    const uint32_t to = patterns::PairwiseTo(rank, step, world_size);
    const uint32_t receive =
        program.Copy(Endpoint::Network(from, hw::kCollectiveTag),
                     AlltoallChunk(Slot::kResult, from, count), count, previous);
    const uint32_t send = program.Copy(AlltoallChunk(input, to, count),
                                       Endpoint::Network(to, hw::kCollectiveTag), count, previous);
    previous = {receive, send};
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
