#include "firmware/alltoall/alltoall_linear.h"

#include <utility>

#include "firmware/patterns/ring.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateAlltoallLinear(const hw::CallDescriptor& call,
                                                   uint32_t world_size) {
  ProgramBuilder program("linear");
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
  // 2. Post every receive: chunk j of the result from rank j.
  for (uint32_t shift = 1; shift < world_size; ++shift) {
    const uint32_t from = patterns::RingRank(rank, -int64_t{shift}, world_size);
    program.Copy(Endpoint::Network(from, hw::kCollectiveTag), chunk(Slot::kResult, from), count);
  }
  // 3. Post every send: chunk j of the input to rank j.
  for (uint32_t shift = 1; shift < world_size; ++shift) {
    const uint32_t to = patterns::RingRank(rank, shift, world_size);
    program.Copy(chunk(input, to), Endpoint::Network(to, hw::kCollectiveTag), count);
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
