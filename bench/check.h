// What --check fills and expects, for cclo-bench's ranks and the baselines' alike: cclo-run's
// patterns and references (client/run/check.h) in the shapes of the sweep's ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bench/sweep.h"
#include "client/run/check.h"
#include "hw/types.h"

namespace cclo::bench {

/// The shape in which `rank` of `ranks` fills its buffers for `op` with `count` elements per
/// rank (rooted ops at root 0; send as sendrecv, its senders' input being the message).
run::OpShape FillShape(Op op, hw::DataType datatype, uint32_t rank, uint32_t ranks, uint64_t count);

/// The shape whose output `rank` checks after `op`; none where the rank receives nothing
/// (nops, send's senders and the last of an odd number of ranks). A send receiver expects
/// what sendrecv's rank after its sender gets: the sender's input.
std::optional<run::OpShape> CheckShape(Op op, hw::DataType datatype, uint32_t rank, uint32_t ranks,
                                       uint64_t count);

/// "rank <rank> index <i> expected <value> got <value>".
std::string MismatchText(uint32_t rank, const run::Mismatch& mismatch);

}  // namespace cclo::bench
