#include "firmware/gather/gather_tree.h"

#include <optional>
#include <utility>
#include <vector>

#include "firmware/patterns/binomial_tree.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using hw::Slot;
using patterns::BinomialSubtree;
using patterns::RankRange;
using patterns::RelativeRange;

// The root: one message per child straight into place, or into scratch for the subtree
// whose chunks wrap past rank size-1.
void AppendRoot(ProgramBuilder& program, const hw::CallDescriptor& call, uint32_t world_size) {
  const uint64_t n = call.count;
  std::vector<RankRange> wrapped;
  for (uint32_t child : patterns::BinomialChildren(call.rank, call.root, world_size)) {
    const RelativeRange subtree = BinomialSubtree(child, call.root, world_size);
    const std::vector<RankRange> runs = patterns::ToRealRanges(subtree, call.root, world_size);
    const Endpoint from_child = Endpoint::Network(child, hw::kCollectiveTag);
    if (runs.size() == 1) {
      // 1. A subtree whose chunks lie in one run arrives straight in place.
      program.Copy(from_child, Endpoint::Memory(Slot::kResult, runs[0].begin * n),
                   subtree.size() * n);
      continue;
    }
    // 2. The one subtree that wraps arrives in scratch.
    program.SetScratch(subtree.size() * n);
    program.Copy(from_child, Endpoint::Memory(Slot::kScratch, 0), subtree.size() * n);
    wrapped = runs;
  }
  // 3. Put the root's own contribution in place (in place it is there already).
  if (!call.in_place) {
    program.Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Memory(Slot::kResult, call.root * n),
                 n);
  }
  // 4. Move the wrapped subtree into place, last, so that waiting for it holds up no receive.
  uint64_t staged = 0;
  for (const RankRange& run : wrapped) {
    program.Copy(Endpoint::Memory(Slot::kScratch, staged),
                 Endpoint::Memory(Slot::kResult, run.begin * n), run.size() * n);
    staged += run.size() * n;
  }
}

}  // namespace

absl::StatusOr<hw::Program> GenerateGatherTree(const hw::CallDescriptor& call,
                                               uint32_t world_size) {
  ProgramBuilder program("tree");
  const uint64_t n = call.count;
  if (n == 0) return std::move(program).Finish();
  const std::optional<uint32_t> parent = patterns::BinomialParent(call.rank, call.root, world_size);
  if (!parent.has_value()) {
    AppendRoot(program, call, world_size);
    return std::move(program).Finish();
  }
  const Endpoint to_parent = Endpoint::Network(*parent, hw::kCollectiveTag);
  const Endpoint input = Endpoint::Memory(Slot::kOp0, 0);
  const RelativeRange mine = BinomialSubtree(call.rank, call.root, world_size);
  if (mine.size() == 1) {
    // 1. A leaf sends its contribution straight to its parent.
    program.Copy(input, to_parent, n);
    return std::move(program).Finish();
  }
  // 1. Put this rank's contribution first in the subtree's scratch area.
  program.SetScratch(mine.size() * n);
  program.Copy(input, Endpoint::Memory(Slot::kScratch, 0), n);
  // 2. Receive each child's subtree into place; the parts are disjoint, so every receive is
  //    posted at once.
  for (uint32_t child : patterns::BinomialChildren(call.rank, call.root, world_size)) {
    const RelativeRange subtree = BinomialSubtree(child, call.root, world_size);
    program.Copy(Endpoint::Network(child, hw::kCollectiveTag),
                 Endpoint::Memory(Slot::kScratch, (subtree.begin - mine.begin) * n),
                 subtree.size() * n);
  }
  // 3. Send the whole subtree to the parent once every part is here (hazards the builder
  //    orders).
  program.Copy(Endpoint::Memory(Slot::kScratch, 0), to_parent, mine.size() * n);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
