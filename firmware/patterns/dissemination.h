// Rank arithmetic of dissemination (Hensgen, Finkel and Manber's barrier): in round k
// (0 .. ceil(log2 size)-1) rank r sends to r+2^k and receives from r-2^k (mod size). After
// round k a rank has heard, directly or through the ranks it heard from, from the 2^(k+1)-1
// ranks before it, so after the last round from every rank. Works for any size. Free of I/O.
#pragma once

#include <cstdint>

namespace cclo::firmware::patterns {

/// Rounds among `size` ranks (size >= 1): ceil(log2 size), 0 for one rank.
uint32_t DisseminationRounds(uint32_t size);

/// The rank `rank` sends to in round `round` (< DisseminationRounds(size)): rank+2^round.
uint32_t DisseminationTo(uint32_t rank, uint32_t round, uint32_t size);

/// The rank `rank` receives from in round `round`: rank-2^round.
uint32_t DisseminationFrom(uint32_t rank, uint32_t round, uint32_t size);

}  // namespace cclo::firmware::patterns
