#include "firmware/reduce/reduce_binary_tree.h"

#include <utility>

#include "firmware/patterns/binary_tree.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

uint64_t AppendReduceBinaryTree(ProgramBuilder& program, uint32_t rank, uint32_t world_size,
                                uint32_t root, const Endpoint& input, const Endpoint& output,
                                uint64_t count) {
  if (count == 0) return 0;
  const patterns::BinaryTreeNode node = patterns::BinaryTreeOf(rank, root, world_size);
  // 1. Fold each child's partial reduction into the accumulator as it arrives: the first
  //    one with our input, the next one with the accumulator.
  const Endpoint accumulator = node.parent ? Endpoint::Memory(Slot::kScratch, 0) : output;
  Endpoint partial = input;
  for (uint32_t child : node.children) {
    program.Reduce(Endpoint::Network(child, hw::kCollectiveTag), partial, accumulator, count);
    partial = accumulator;
  }
  // 2. Pass the partial reduction up; the root without children takes its input as it is.
  if (node.parent) {
    program.Copy(partial, Endpoint::Network(*node.parent, hw::kCollectiveTag), count);
  } else if (partial != output) {
    program.Copy(input, output, count);
  }
  return node.parent && !node.children.empty() ? count : 0;
}

absl::StatusOr<hw::Program> GenerateReduceBinaryTree(const hw::CallDescriptor& call,
                                                     uint32_t world_size) {
  ProgramBuilder program("binary_tree");
  const Endpoint input = Endpoint::Memory(call.in_place ? Slot::kResult : Slot::kOp0, 0);
  program.SetScratch(AppendReduceBinaryTree(program, call.rank, world_size, call.root, input,
                                            Endpoint::Memory(Slot::kResult, 0), call.count));
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
