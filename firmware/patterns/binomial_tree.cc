#include "firmware/patterns/binomial_tree.h"

#include <algorithm>

namespace cclo::firmware::patterns {
namespace {

// The span of relative rank v's subtree before it is cut at size: its lowest set bit, or
// for the root a power of two no smaller than size.
uint64_t Span(uint32_t relative, uint32_t size) {
  if (relative != 0) return relative & (~relative + 1);
  uint64_t span = 1;
  while (span < size) span <<= 1;
  return span;
}

}  // namespace

uint32_t ToRelative(uint32_t rank, uint32_t root, uint32_t size) {
  return rank >= root ? rank - root : rank + (size - root);
}

uint32_t ToReal(uint32_t relative, uint32_t root, uint32_t size) {
  return relative < size - root ? relative + root : relative - (size - root);
}

std::optional<uint32_t> BinomialParent(uint32_t rank, uint32_t root, uint32_t size) {
  const uint32_t relative = ToRelative(rank, root, size);
  if (relative == 0) return std::nullopt;
  return ToReal(relative & (relative - 1), root, size);
}

std::vector<uint32_t> BinomialChildren(uint32_t rank, uint32_t root, uint32_t size) {
  const uint32_t relative = ToRelative(rank, root, size);
  // Children by falling span; the first one's subtree may be cut short at size, so a stable
  // sort by subtree size puts it where it belongs.
  std::vector<uint32_t> children;
  for (uint64_t step = Span(relative, size) / 2; step > 0; step /= 2) {
    if (relative + step < size) children.push_back(ToReal(relative + step, root, size));
  }
  std::stable_sort(children.begin(), children.end(), [&](uint32_t a, uint32_t b) {
    return BinomialSubtree(a, root, size).size() > BinomialSubtree(b, root, size).size();
  });
  return children;
}

RelativeRange BinomialSubtree(uint32_t rank, uint32_t root, uint32_t size) {
  const uint32_t relative = ToRelative(rank, root, size);
  const uint64_t end = std::min<uint64_t>(relative + Span(relative, size), size);
  return RelativeRange{relative, static_cast<uint32_t>(end)};
}

std::vector<RankRange> ToRealRanges(RelativeRange range, uint32_t root, uint32_t size) {
  if (range.size() == 0) return {};
  const uint32_t wrap = size - root;  // the relative rank of real rank 0
  if (range.end <= wrap) return {RankRange{range.begin + root, range.end + root}};
  if (range.begin >= wrap) return {RankRange{range.begin - wrap, range.end - wrap}};
  return {RankRange{range.begin + root, size}, RankRange{0, range.end - wrap}};
}

}  // namespace cclo::firmware::patterns
