#include "firmware/patterns/binary_tree.h"

namespace cclo::firmware::patterns {

BinaryTreeNode BinaryTreeOf(uint32_t rank, uint32_t root, uint32_t size) {
  // Relative ranks in 64 bits, so 2v+2 cannot wrap for any 32-bit size.
  const uint64_t relative = (uint64_t{rank} + size - root) % size;
  auto real = [&](uint64_t v) { return static_cast<uint32_t>((v + root) % size); };
  BinaryTreeNode node;
  if (relative > 0) node.parent = real((relative - 1) / 2);
  for (uint64_t child = 2 * relative + 1; child <= 2 * relative + 2 && child < size; ++child) {
    node.children.push_back(real(child));
  }
  return node;
}

}  // namespace cclo::firmware::patterns
