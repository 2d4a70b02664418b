// Rank arithmetic of a pairwise exchange: in step s (1 .. size-1) rank r sends to r+s and
// receives from r-s (mod size). Each step pairs every rank with exactly one destination and
// one source, and over the size-1 steps every rank meets every other rank once in each
// direction. Free of I/O.
#pragma once

#include <cstdint>

namespace cclo::firmware::patterns {

/// Steps of a pairwise exchange among `size` ranks (size >= 1): size-1.
uint32_t PairwiseSteps(uint32_t size);

/// The rank `rank` sends to in step `step` (1 .. size-1): rank+step mod size.
uint32_t PairwiseTo(uint32_t rank, uint32_t step, uint32_t size);

/// The rank `rank` receives from in step `step` (1 .. size-1): rank-step mod size.
uint32_t PairwiseFrom(uint32_t rank, uint32_t step, uint32_t size);

}  // namespace cclo::firmware::patterns
