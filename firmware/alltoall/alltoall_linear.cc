#include "firmware/alltoall/alltoall_linear.h"

#include <utility>

#include "firmware/alltoall/alltoall_input.h"
#include "firmware/patterns/ring.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateAlltoallLinear(const hw::CallDescriptor& call,
                                                   uint32_t world_size) {
  ProgramBuilder program("linear");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const uint32_t rank = call.rank;
  // 1. The input: op0, or in place a copy of the result in scratch (alltoall_input.h).
  const Slot input = PlaceAlltoallInput(program, call, world_size);
  // 2. Post every receive: chunk j of the result from rank j.
  for (uint32_t shift = 1; shift < world_size; ++shift) {
    const uint32_t from = patterns::RingRank(rank, -int64_t{shift}, world_size);
    program.Copy(Endpoint::Network(from, hw::kCollectiveTag),
                 AlltoallChunk(Slot::kResult, from, count), count);
  }
  // 3. Post every send: chunk j of the input to rank j.
  for (uint32_t shift = 1; shift < world_size; ++shift) {
    const uint32_t to = patterns::RingRank(rank, shift, world_size);
    program.Copy(AlltoallChunk(input, to, count), Endpoint::Network(to, hw::kCollectiveTag), count);
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
