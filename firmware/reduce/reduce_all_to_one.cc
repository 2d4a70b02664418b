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
  // 2. The root receives from every other rank at once: the rank i places after it into
  //    scratch chunk i-1.
  const uint32_t peers = world_size - 1;
  program.SetScratch(peers * count);
  for (uint32_t i = 0; i < peers; ++i) {
    const uint32_t peer = patterns::RingRank(call.root, int64_t{i} + 1, world_size);
    program.Copy(Endpoint::Network(peer, hw::kCollectiveTag),
                 Endpoint::Memory(Slot::kScratch, i * count), count);
  }
  // 3. Fold the received chunks, in turn, into the result, the first one with our input.
  const Endpoint result = Endpoint::Memory(Slot::kResult, 0);
  Endpoint partial = input;
  for (uint32_t i = 0; i < peers; ++i) {
    program.Reduce(Endpoint::Memory(Slot::kScratch, i * count), partial, result, count);
    partial = result;
  }
  // 4. Alone, the root's input is the result.
  if (partial != result) program.Copy(input, result, count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
