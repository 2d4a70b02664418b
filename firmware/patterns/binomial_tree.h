// Rank arithmetic of a binomial tree rooted at any rank. Ranks are renumbered relative to
// the root (relative rank v = rank - root mod size), so the root is 0. The parent of v > 0
// is v with its lowest set bit cleared; the children of v are v + 2^k for every 2^k below
// v's lowest set bit (every 2^k below size for the root) with v + 2^k < size. The subtree of
// v is the run of relative ranks [v, v + lowbit(v)) cut at size, so every subtree is a
// contiguous run of relative ranks and the child v + 2^k heads a subtree of at most 2^k
// ranks. Children are sent to largest subtree first (deepest first), which is falling k
// except that the subtree of the largest k may be cut short. Depth: ceil(log2(size)).
// Free of I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace cclo::firmware::patterns {

/// `rank`'s number relative to `root` in a world of `size` ranks: (rank - root) mod size.
uint32_t ToRelative(uint32_t rank, uint32_t root, uint32_t size);

/// The real rank of relative rank `relative`: (relative + root) mod size.
uint32_t ToReal(uint32_t relative, uint32_t root, uint32_t size);

/// The real rank `rank` receives from in the tree rooted at `root`, or nullopt for the root.
std::optional<uint32_t> BinomialParent(uint32_t rank, uint32_t root, uint32_t size);

/// The real ranks `rank` sends to in the tree rooted at `root`, largest subtree first (equal
/// sizes: larger relative rank first).
std::vector<uint32_t> BinomialChildren(uint32_t rank, uint32_t root, uint32_t size);

/// A run of relative ranks [begin, end).
struct RelativeRange {
  uint32_t begin = 0;
  uint32_t end = 0;  ///< one past the last
  uint32_t size() const { return end - begin; }
  bool operator==(const RelativeRange&) const = default;
};

/// The relative ranks of the subtree headed by `rank` (itself first) in the tree rooted at
/// `root`; [0, size) for the root.
RelativeRange BinomialSubtree(uint32_t rank, uint32_t root, uint32_t size);

/// A run of real ranks [begin, end).
struct RankRange {
  uint32_t begin = 0;
  uint32_t end = 0;  ///< one past the last
  uint32_t size() const { return end - begin; }
  bool operator==(const RankRange&) const = default;
};

/// The real ranks of the relative ranks in `range` (relative to `root`), in relative order:
/// one run, or two where the range wraps past rank size-1; none for an empty range.
std::vector<RankRange> ToRealRanges(RelativeRange range, uint32_t root, uint32_t size);

}  // namespace cclo::firmware::patterns
