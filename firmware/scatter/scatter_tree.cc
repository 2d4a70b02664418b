#include "firmware/scatter/scatter_tree.h"

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

// The root: one message per child straight from `chunks`, or from scratch for the subtree
// whose chunks wrap past rank size-1.
void AppendRoot(ProgramBuilder& program, const hw::CallDescriptor& call, uint32_t world_size) {
  const uint64_t n = call.count;
  const Slot chunks = call.in_place ? Slot::kResult : Slot::kOp0;
  for (uint32_t child : patterns::BinomialChildren(call.rank, call.root, world_size)) {
    const RelativeRange subtree = BinomialSubtree(child, call.root, world_size);
    const std::vector<RankRange> runs = patterns::ToRealRanges(subtree, call.root, world_size);
    const Endpoint to_child = Endpoint::Network(child, hw::kCollectiveTag);
    if (runs.size() == 1) {
      // 1. A subtree whose chunks lie in one run goes straight from the chunks.
      program.Copy(Endpoint::Memory(chunks, runs[0].begin * n), to_child, subtree.size() * n);
      continue;
    }
    // 2. The one subtree that wraps is put together in scratch first.
    program.SetScratch(subtree.size() * n);
    uint64_t staged = 0;
    for (const RankRange& run : runs) {
      program.Copy(Endpoint::Memory(chunks, run.begin * n),
                   Endpoint::Memory(Slot::kScratch, staged), run.size() * n);
      staged += run.size() * n;
    }
    program.Copy(Endpoint::Memory(Slot::kScratch, 0), to_child, staged);
  }
  // 3. Keep the root's own chunk (in place it is there already).
  if (!call.in_place) {
    program.Copy(Endpoint::Memory(Slot::kOp0, call.root * n), Endpoint::Memory(Slot::kResult, 0),
                 n);
  }
}

}  // namespace

absl::StatusOr<hw::Program> GenerateScatterTree(const hw::CallDescriptor& call,
                                                uint32_t world_size) {
  ProgramBuilder program("tree");
  const uint64_t n = call.count;
  if (n == 0) return std::move(program).Finish();
  const std::optional<uint32_t> parent = patterns::BinomialParent(call.rank, call.root, world_size);
  if (!parent.has_value()) {
    AppendRoot(program, call, world_size);
    return std::move(program).Finish();
  }
  const Endpoint from_parent = Endpoint::Network(*parent, hw::kCollectiveTag);
  const Endpoint result = Endpoint::Memory(Slot::kResult, 0);
  const RelativeRange mine = BinomialSubtree(call.rank, call.root, world_size);
  if (mine.size() == 1) {
    // 1. A leaf receives its own chunk straight into its result.
    program.Copy(from_parent, result, n);
    return std::move(program).Finish();
  }
  // 1. Receive the chunks of the whole subtree, this rank's first, into scratch.
  program.SetScratch(mine.size() * n);
  program.Copy(from_parent, Endpoint::Memory(Slot::kScratch, 0), mine.size() * n);
  // 2. Send each child the chunks of its subtree once they are here.
  for (uint32_t child : patterns::BinomialChildren(call.rank, call.root, world_size)) {
    const RelativeRange subtree = BinomialSubtree(child, call.root, world_size);
    program.Copy(Endpoint::Memory(Slot::kScratch, (subtree.begin - mine.begin) * n),
                 Endpoint::Network(child, hw::kCollectiveTag), subtree.size() * n);
  }
  // 3. Keep this rank's own chunk.
  program.Copy(Endpoint::Memory(Slot::kScratch, 0), result, n);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
