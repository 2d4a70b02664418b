// Rank arithmetic of recursive doubling (and halving): in step k a rank exchanges with the
// rank whose number differs in bit k. Worlds that are not a power of two are folded first:
// with p the largest power of two not above size and extra = size - p, the ranks below
// 2*extra pair up (2i with 2i+1); the even one of each pair hands its data to the odd one
// and sits out, and the odd ones plus the ranks from 2*extra on form a power-of-two "core"
// of p ranks that runs the exchange. Free of I/O.
#pragma once

#include <cstdint>
#include <optional>

namespace cclo::firmware::patterns {

/// The largest power of two not above `size` (size >= 1).
uint32_t PowerOfTwoFloor(uint32_t size);

/// Where a rank stands in the folded world of `size` ranks.
struct Fold {
  /// The rank's number in the core (0 .. p-1), or nullopt for an even rank that sits out.
  std::optional<uint32_t> core_rank;
  /// The other rank of its pair (below 2*extra), or nullopt for a rank that is not paired.
  std::optional<uint32_t> pair;
};

/// The fold of `rank` in a world of `size` ranks.
Fold FoldOf(uint32_t rank, uint32_t size);

/// The real rank of core rank `core_rank` (< PowerOfTwoFloor(size)).
uint32_t CoreToRank(uint32_t core_rank, uint32_t size);

/// The real rank `rank`'s core partner in step `step` (0-based, 2^step < p): the core rank
/// whose number differs from `core_rank` in bit `step`.
uint32_t CorePartner(uint32_t core_rank, uint32_t step, uint32_t size);

/// Steps of the exchange: log2(PowerOfTwoFloor(size)).
uint32_t DoublingSteps(uint32_t size);

}  // namespace cclo::firmware::patterns
