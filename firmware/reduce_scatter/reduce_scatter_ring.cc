#include "firmware/reduce_scatter/reduce_scatter_ring.h"

#include "firmware/patterns/ring.h"

namespace cclo::firmware {

using hw::Endpoint;
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

}  // namespace cclo::firmware
