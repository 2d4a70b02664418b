#include "firmware/bcast/bcast_binomial_tree.h"

#include <optional>
#include <utility>

#include "firmware/patterns/binomial_tree.h"

namespace cclo::firmware {

using hw::Endpoint;

void AppendBcastBinomialTree(ProgramBuilder& program, uint32_t rank, uint32_t world_size,
                             uint32_t root, hw::Slot slot, uint64_t count) {
  if (count == 0) return;
  const Endpoint buffer = Endpoint::Memory(slot, 0);
  // 1. Receive the buffer from the parent (the root has it already).
  if (const std::optional<uint32_t> parent = patterns::BinomialParent(rank, root, world_size)) {
    program.Copy(Endpoint::Network(*parent, hw::kCollectiveTag), buffer, count);
  }
  // 2. Send it to every child, largest subtree first; the sends wait for the receive (a
  //    memory hazard the builder orders) and otherwise run at once.
  for (uint32_t child : patterns::BinomialChildren(rank, root, world_size)) {
    program.Copy(buffer, Endpoint::Network(child, hw::kCollectiveTag), count);
  }
}

absl::StatusOr<hw::Program> GenerateBcastBinomialTree(const hw::CallDescriptor& call,
                                                      uint32_t world_size) {
  ProgramBuilder program("binomial_tree");
  AppendBcastBinomialTree(program, call.rank, world_size, call.root, hw::Slot::kResult, call.count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
