#include "firmware/reduce/reduce_all_to_one.h"

#include <utility>

#include "firmware/patterns/ring.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateReduceAllToOne(const hw::CallDescriptor& call,
                                                   uint32_t world_size) {
  ProgramBuilder program("all_to_one");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const Endpoint input = Endpoint::Memory(call.in_place ? Slot::kResult : Slot::kOp0, 0);
  // 1. Every rank but the root sends its input to the root, and is done.
  if (call.rank != call.root) {
    program.Copy(input, Endpoint::Network(call.root, hw::kCollectiveTag), count);
    return std::move(program).Finish();
  }
  // 2. The root receives from every other rank at once. The next rank's message is reduced
  //    with our input into the result as it arrives; the rank i places after us lands in
  //    scratch chunk i-2 meanwhile.
  const Endpoint result = Endpoint::Memory(Slot::kResult, 0);
  const uint32_t peers = world_size - 1;
  if (peers == 0) {  // alone, the root's input is the result
    if (input != result) program.Copy(input, result, count);
    return std::move(program).Finish();
  }
  auto peer = [&](uint32_t i) {
    return Endpoint::Network(patterns::RingRank(call.root, int64_t{i} + 1, world_size),
                             hw::kCollectiveTag);
  };
  program.Reduce(peer(0), input, result, count);
  if (peers > 1) program.SetScratch((peers - 1) * count);
  for (uint32_t i = 1; i < peers; ++i) {
    program.Copy(peer(i), Endpoint::Memory(Slot::kScratch, (i - 1) * count), count);
  }
  // 3. Fold the others, in turn, into the result.
  for (uint32_t i = 1; i < peers; ++i) {
    program.Reduce(Endpoint::Memory(Slot::kScratch, (i - 1) * count), result, result, count);
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
