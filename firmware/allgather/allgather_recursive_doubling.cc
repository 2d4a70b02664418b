#include "firmware/allgather/allgather_recursive_doubling.h"

#include <utility>

#include "firmware/patterns/recursive_doubling.h"
#include "firmware/patterns/ring.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;
using patterns::Chunk;

// The elements of the result that the aligned group of `ranks` core ranks from core rank
// `first` on has gathered: the chunks of their real ranks and of the even partners folded
// into them, which form one contiguous range.
Chunk GroupElements(uint32_t first, uint32_t ranks, uint32_t world_size, uint64_t count) {
  const uint32_t first_rank = patterns::CoreToRank(first, world_size);
  const bool paired = patterns::FoldOf(first_rank, world_size).pair.has_value();
  const uint32_t low = paired ? first_rank - 1 : first_rank;
  const uint32_t high = patterns::CoreToRank(first + ranks - 1, world_size) + 1;
  return Chunk{uint64_t{low} * count, uint64_t{high - low} * count};
}

}  // namespace

absl::StatusOr<hw::Program> GenerateAllgatherRecursiveDoubling(const hw::CallDescriptor& call,
                                                               uint32_t world_size) {
  ProgramBuilder program("recursive_doubling");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const uint32_t rank = call.rank;
  const uint64_t total = uint64_t{world_size} * count;
  const Endpoint all = Endpoint::Memory(Slot::kResult, 0);
  const Endpoint mine = Endpoint::Memory(Slot::kResult, uint64_t{rank} * count);
  // 1. Our contribution goes to chunk `rank` of the result (already there in place).
  if (!call.in_place) program.Copy(Endpoint::Memory(Slot::kOp0, 0), mine, count);

  const patterns::Fold fold = patterns::FoldOf(rank, world_size);
  if (!fold.core_rank.has_value()) {
    // 2. An even rank of a low pair hands its chunk to its partner and gets everything back.
    const Endpoint partner = Endpoint::Network(*fold.pair, hw::kCollectiveTag);
    program.Copy(mine, partner, count);
    program.Copy(partner, all, total);
    return std::move(program).Finish();
  }
  // 2. An odd rank of a low pair takes in its partner's chunk, just below its own.
  if (fold.pair.has_value()) {
    program.Copy(Endpoint::Network(*fold.pair, hw::kCollectiveTag),
                 Endpoint::Memory(Slot::kResult, uint64_t{*fold.pair} * count), count);
  }
  // 3. Step k: swap the group of 2^k core ranks gathered so far with the partner's group.
  const uint32_t core = *fold.core_rank;
  for (uint32_t step = 0; step < patterns::DoublingSteps(world_size); ++step) {
    const uint32_t group = uint32_t{1} << step;
    const Chunk ours = GroupElements(core & ~(group - 1), group, world_size, count);
    const Chunk theirs = GroupElements((core ^ group) & ~(group - 1), group, world_size, count);
    const Endpoint partner =
        Endpoint::Network(patterns::CorePartner(core, step, world_size), hw::kCollectiveTag);
    program.Copy(partner, Endpoint::Memory(Slot::kResult, theirs.offset), theirs.count);
    program.Copy(Endpoint::Memory(Slot::kResult, ours.offset), partner, ours.count);
  }
  // 4. Unfold: the odd rank of a low pair sends the whole result to its even partner.
  if (fold.pair.has_value()) {
    program.Copy(all, Endpoint::Network(*fold.pair, hw::kCollectiveTag), total);
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
