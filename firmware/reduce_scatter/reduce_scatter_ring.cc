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
                             hw::Slot input, hw::Slot work, uint64_t count,
                             std::optional<hw::Endpoint> out) {
  const Chunk own = RingChunk(count, world_size, rank);
  const Endpoint reduced = out.value_or(Endpoint::Memory(work, own.offset));
  if (world_size == 1) {
    const Endpoint contribution = Endpoint::Memory(input, own.offset);
    if (own.count > 0 && contribution != reduced) program.Copy(contribution, reduced, own.count);
    return;
  }
  const Endpoint from_left =
      Endpoint::Network(patterns::RingLeft(rank, world_size), hw::kCollectiveTag);
  const Endpoint to_right =
      Endpoint::Network(patterns::RingRight(rank, world_size), hw::kCollectiveTag);
  for (uint32_t step = 0; step + 1 < world_size; ++step) {
    // 1. Reduce the partial chunk r-s-2 arriving from the left with our contribution to
    //    it; in the last step that chunk is r, fully reduced.
    const Chunk incoming =
        RingChunk(count, world_size, RingRank(rank, -int64_t{step} - 2, world_size));
    if (incoming.count > 0) {
      const bool last = step + 2 == world_size;
      program.Reduce(from_left, Endpoint::Memory(input, incoming.offset),
                     last ? reduced : Endpoint::Memory(work, incoming.offset), incoming.count);
    }
    // 2. Pass chunk r-s-1 right: our own contribution at step 0, then the one reduced in
    //    the previous step.
    const Chunk outgoing =
        RingChunk(count, world_size, RingRank(rank, -int64_t{step} - 1, world_size));
    if (outgoing.count > 0) {
      const Endpoint chunk = Endpoint::Memory(step == 0 ? input : work, outgoing.offset);
      program.Copy(chunk, to_right, outgoing.count);
    }
  }
}

absl::StatusOr<hw::Program> GenerateReduceScatterRing(const hw::CallDescriptor& call,
                                                      uint32_t world_size) {
  ProgramBuilder program("ring");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const uint64_t total = uint64_t{world_size} * count;
  const Endpoint output = Endpoint::Memory(Slot::kResult, 0);
  // The ring over all the input: its ring chunk i is [i*count, (i+1)*count).
  if (!call.in_place) {
    // Partial chunks (none with 2 ranks) in scratch; ours, reduced, straight to the result.
    if (world_size > 2) program.SetScratch(total);
    AppendReduceScatterRing(program, call.rank, world_size, Slot::kOp0, Slot::kScratch, total,
                            output);
    return std::move(program).Finish();
  }
  // In place the ring works on the input in the result buffer; our reduced chunk then
  // goes to its start (there already for rank 0).
  AppendReduceScatterRing(program, call.rank, world_size, Slot::kResult, Slot::kResult, total,
                          std::nullopt);
  const Endpoint reduced = Endpoint::Memory(Slot::kResult, uint64_t{call.rank} * count);
  if (reduced != output) program.Copy(reduced, output, count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
