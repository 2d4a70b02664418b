#include "firmware/reduce_scatter/reduce_scatter_ring.h"

#include <utility>

#include "firmware/patterns/ring.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;
using patterns::Chunk;
using patterns::RingChunk;
using patterns::RingRank;

void AppendReduceScatterRing(ProgramBuilder& program, uint32_t rank, uint32_t world_size,
                             hw::Slot slot, uint64_t count) {
  const Endpoint from_left =
      Endpoint::Network(patterns::RingLeft(rank, world_size), hw::kCollectiveTag);
  const Endpoint to_right =
      Endpoint::Network(patterns::RingRight(rank, world_size), hw::kCollectiveTag);
  for (uint32_t step = 0; step + 1 < world_size; ++step) {
    // 1. Reduce the partial chunk r-s-2 arriving from the left into our copy of it.
    const Chunk incoming =
        RingChunk(count, world_size, RingRank(rank, -int64_t{step} - 2, world_size));
    if (incoming.count > 0) {
      const Endpoint chunk = Endpoint::Memory(slot, incoming.offset);
      program.Reduce(from_left, chunk, chunk, incoming.count);
    }
    // 2. Pass chunk r-s-1, reduced in the previous step (or our own at step 0), right.
    const Chunk outgoing =
        RingChunk(count, world_size, RingRank(rank, -int64_t{step} - 1, world_size));
    if (outgoing.count > 0) {
      program.Copy(Endpoint::Memory(slot, outgoing.offset), to_right, outgoing.count);
    }
  }
}

absl::StatusOr<hw::Program> GenerateReduceScatterRing(const hw::CallDescriptor& call,
                                                      uint32_t world_size) {
  ProgramBuilder program("ring");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const uint64_t total = uint64_t{world_size} * count;
  // 1. Work on a copy of op0 in scratch, or in place on the input in the result buffer.
  Slot work = Slot::kResult;
  if (!call.in_place) {
    work = Slot::kScratch;
    program.SetScratch(total);
    program.Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Memory(work, 0), total);
  }
  // 2. The ring over all the input: its ring chunk i is [i*count, (i+1)*count).
  AppendReduceScatterRing(program, call.rank, world_size, work, total);
  // 3. Our reduced chunk goes to the start of the result (there already for rank 0 in place).
  const Endpoint reduced = Endpoint::Memory(work, uint64_t{call.rank} * count);
  const Endpoint output = Endpoint::Memory(Slot::kResult, 0);
  if (reduced != output) program.Copy(reduced, output, count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
