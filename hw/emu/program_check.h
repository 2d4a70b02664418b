// Checks a Program against the call it runs for before the DMP executes any of it, so
// that a bad program is an error completion and never a stray memory access.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::hw::emu {

/// INVALID_ARGUMENT naming the move and what is wrong unless every move of `program`:
/// depends only on earlier moves; has at most one network endpoint; is a copy with op0
/// and no op1, or a reduce with both operands and a result; writes somewhere unless it
/// receives; names peers below `world_size`; reads and writes memory inside the call's
/// buffer views or the program's scratch (at most count x world_size elements); and, for
/// reduces, has each memory operand either exactly on or clear of
/// its memory result.
absl::Status CheckProgram(const Program& program, const CallDescriptor& call,
                          const CallBuffers& buffers, uint32_t world_size);

}  // namespace cclo::hw::emu
