// Rank arithmetic of a binary tree over the ranks of a world, rooted at any rank: ranks are
// numbered relative to the root (v = rank - root mod size), and relative rank v has parent
// (v-1)/2 and children 2v+1 and 2v+2 where they exist, as in a binary heap. The tree is
// complete, so its depth is floor(log2(size)). Free of I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace cclo::firmware::patterns {

/// Where a rank stands in the binary tree of `size` ranks rooted at `root`.
struct BinaryTreeNode {
  std::optional<uint32_t> parent;  ///< real rank of the parent; nullopt at the root
  std::vector<uint32_t> children;  ///< real ranks of the 0, 1 or 2 children, left first
};

/// The node of `rank` in the binary tree of `size` ranks rooted at `root` (both < size).
BinaryTreeNode BinaryTreeOf(uint32_t rank, uint32_t root, uint32_t size);

}  // namespace cclo::firmware::patterns
