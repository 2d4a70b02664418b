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
  // 2. A core rank's value so far: its input, reduced with its pair's (into result) if it
  //    has one, the lower rank's (the pair's) first.
  Endpoint value = input;
  if (fold.pair) {
    program.Reduce(Endpoint::Network(*fold.pair, hw::kCollectiveTag), input, result, count);
    value = result;
  }
  // 3. In each step swap the value with the step's partner and reduce the partner's into
  //    result. While the value is the untouched input the partner's is reduced as it
  //    arrives; once it is the result (which is being sent), it arrives into scratch first.
  //    Both partners put the lower core ranks' value first, so they compute the same bits
  //    even where the op is not commutative bit for bit (max of +0 and -0, NaN payloads).
  const uint32_t steps = patterns::DoublingSteps(world_size);
  const Endpoint scratch = Endpoint::Memory(Slot::kScratch, 0);
  for (uint32_t step = 0; step < steps; ++step) {
    const Endpoint partner = Endpoint::Network(
        patterns::CorePartner(*fold.core_rank, step, world_size), hw::kCollectiveTag);
    const bool lower = (*fold.core_rank >> step & 1) == 0;
    auto reduce = [&](const Endpoint& ours, const Endpoint& theirs) {
      program.Reduce(lower ? ours : theirs, lower ? theirs : ours, result, count);
    };
    if (value != result) {
      program.Copy(value, partner, count);
      reduce(value, partner);
      value = result;
      continue;
    }
    program.SetScratch(count);
    program.Copy(partner, scratch, count);
    program.Copy(result, partner, count);
    reduce(result, scratch);
  }
  if (value != result) program.Copy(value, result, count);  // one rank, not in place
  // 4. Hand the result back to the pair's even rank.
  if (fold.pair) program.Copy(result, Endpoint::Network(*fold.pair, hw::kCollectiveTag), count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
