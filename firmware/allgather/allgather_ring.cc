#include "firmware/allgather/allgather_ring.h"

#include <utility>

#include "firmware/patterns/ring.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;
using patterns::Chunk;
using patterns::RingChunk;
using patterns::RingRank;

void AppendAllgatherRing(ProgramBuilder& program, uint32_t rank, uint32_t world_size, hw::Slot slot,
                         uint64_t count) {
  const Endpoint from_left =
      Endpoint::Network(patterns::RingLeft(rank, world_size), hw::kCollectiveTag);
  const Endpoint to_right =
      Endpoint::Network(patterns::RingRight(rank, world_size), hw::kCollectiveTag);
  for (uint32_t step = 0; step + 1 < world_size; ++step) {
    // 1. Receive chunk r-s-1 from the left into place.
    const Chunk incoming =
        RingChunk(count, world_size, RingRank(rank, -int64_t{step} - 1, world_size));
    if (incoming.count > 0) {
      program.Copy(from_left, Endpoint::Memory(slot, incoming.offset), incoming.count);
    }
    // 2. Pass chunk r-s, our own at step 0 and otherwise the one received before, right.
    const Chunk outgoing = RingChunk(count, world_size, RingRank(rank, -int64_t{step}, world_size));
    if (outgoing.count > 0) {
      program.Copy(Endpoint::Memory(slot, outgoing.offset), to_right, outgoing.count);
    }
  }
}

absl::StatusOr<hw::Program> GenerateAllgatherRing(const hw::CallDescriptor& call,
                                                  uint32_t world_size) {
  ProgramBuilder program("ring");
  if (call.count == 0) return std::move(program).Finish();
  // 1. Our contribution goes to chunk `rank` of the result (already there in place).
  if (!call.in_place) {
    program.Copy(Endpoint::Memory(Slot::kOp0, 0),
                 Endpoint::Memory(Slot::kResult, uint64_t{call.rank} * call.count), call.count);
  }
  // 2. The ring over the whole result: its ring chunk i is [i*count, (i+1)*count).
  AppendAllgatherRing(program, call.rank, world_size, Slot::kResult,
                      uint64_t{world_size} * call.count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
