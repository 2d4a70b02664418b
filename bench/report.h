// cclo-bench's table: per op and size our times and bandwidths beside the baselines'.
#pragma once

#include <map>
#include <string>

#include "bench/baselines.h"
#include "bench/cclo_sweep.h"
#include "bench/options.h"
#include "bench/sweep.h"

namespace cclo::bench {

/// Everything a run measured, over one round or pooled over several.
struct Measurements {
  CcloResults cclo;
  std::map<Baseline, Timings> stacks;         ///< mpi and gloo, where asked for
  std::map<Baseline, uint32_t> stack_rounds;  ///< how many rounds each of `stacks` ran in
  LinkRates link;                             ///< iperf3's mean, where asked for (else zeros)
  uint32_t link_runs = 0;                     ///< how many iperf3 runs `link` is the mean of
};

/// Adds one round to `into`: each stack's iteration times appended to its own (and its
/// rounds counted), daemon CPU seconds summed, a failed check kept over "ok", the link
/// rates averaged.
void Pool(Measurements& into, Measurements round);

/// One row per op and size we ran: size, p50 and p99 time (us), algbw and busbw (GB/s,
/// from the p50 time), daemon CPU seconds per GiB moved (size x ranks x iterations x rounds,
/// send's ranks only those that send; "-" below 0.1 s of CPU), the check's verdict with --check;
/// per stack baseline its p50 and their p50 / our p50 (above 1: we are faster; the same as our
/// busbw / theirs); with the link, our busbw / iperf3's one-stream rate and / its per-direction
/// rate with both directions at once.
std::string RenderReport(const BenchOptions& options, const Measurements& measurements);

/// Sizes from which RenderGeomeans averages (the allreduce target: 1 MiB to 64 MiB).
inline constexpr uint64_t kGeomeanFromBytes = uint64_t{1} << 20;

/// One row per op we ran at sizes of kGeomeanFromBytes and more: how many such sizes, the
/// first and the last, and per stack baseline the geometric mean over them of their p50 /
/// our p50 ("-" where the stack lacks one of those sizes). Empty without a baseline or such
/// a size.
std::string RenderGeomeans(const Measurements& measurements);

}  // namespace cclo::bench
