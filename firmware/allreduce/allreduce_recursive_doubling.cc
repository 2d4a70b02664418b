#include "firmware/allreduce/allreduce_recursive_doubling.h"

#include <utility>

#include "firmware/patterns/recursive_doubling.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateAllreduceRecursiveDoubling(const hw::CallDescriptor& call,
                                                               uint32_t world_size) {
  ProgramBuilder program("recursive_doubling");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const Endpoint input = Endpoint::Memory(call.in_place ? Slot::kResult : Slot::kOp0, 0);
  const Endpoint result = Endpoint::Memory(Slot::kResult, 0);
  const patterns::Fold fold = patterns::FoldOf(call.rank, world_size);
  // 1. The even rank of a low pair hands its input to its partner and waits for the result.
  if (!fold.core_rank) {
    const Endpoint partner = Endpoint::Network(*fold.pair, hw::kCollectiveTag);
    program.Copy(input, partner, count);
    program.Copy(partner, result, count);
    return std::move(program).Finish();
  }
  // 2. A core rank starts from its input in result, reduced with its pair's if it has one.
  if (fold.pair) {
    program.Reduce(Endpoint::Network(*fold.pair, hw::kCollectiveTag), input, result, count);
  } else if (!call.in_place) {
    program.Copy(input, result, count);
  }
  // 3. In each step swap the whole buffer with the step's partner, receiving into scratch,
  //    and reduce the partner's into ours.
  const uint32_t steps = patterns::DoublingSteps(world_size);
  const Endpoint scratch = Endpoint::Memory(Slot::kScratch, 0);
  if (steps > 0) program.SetScratch(count);
  for (uint32_t step = 0; step < steps; ++step) {
    const Endpoint partner = Endpoint::Network(
        patterns::CorePartner(*fold.core_rank, step, world_size), hw::kCollectiveTag);
    program.Copy(partner, scratch, count);
    program.Copy(result, partner, count);
    program.Reduce(scratch, result, result, count);
  }
  // 4. Hand the result back to the pair's even rank.
  if (fold.pair) program.Copy(result, Endpoint::Network(*fold.pair, hw::kCollectiveTag), count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
