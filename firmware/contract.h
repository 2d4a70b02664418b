// The buffer contract of every collective: how many elements each of the call's three
// buffers must hold, so that the daemon can check buffer bounds before it generates and
// runs a program. Every algorithm of a collective stays inside these bounds (the verifier
// runs each one on buffers of exactly this size).
#pragma once

#include <cstdint>

#include "hw/program.h"
#include "hw/types.h"

namespace cclo::firmware {

/// Elements of the call's datatype that buffer `slot` must hold for `collective` with
/// `count` elements per rank on `world_size` ranks; 0 for a slot the collective does not
/// use (and for unknown collectives or slots).
///   send: op0 = count.  recv: result = count.  bcast: result = count (root and others).
///   allreduce: op0 = count, result = count.  nop: nothing.
uint64_t RequiredElements(hw::Collective collective, hw::Slot slot, uint64_t count,
                          uint32_t world_size);

}  // namespace cclo::firmware
