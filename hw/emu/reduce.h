// Reduce plugin of the software CCLO: elementwise kernels for every datatype and reduce op,
// and the float16/bfloat16 conversions they use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "hw/types.h"

namespace cclo::hw::emu {

/// Computes out[i] = a[i] (op) b[i] for i < count, elements of `type`.
///
/// `out` may be the same pointer as `a` or `b`; other overlaps are not allowed. Pointers
/// need no alignment. Integers wrap modulo 2^bits on sum and prod. float16 and bfloat16 are
/// computed in float32 and rounded once, to nearest even. max and min propagate NaN.
/// Returns INVALID_ARGUMENT for an unknown `op` or `type`, or a null pointer with count > 0.
absl::Status Reduce(ReduceOp op, DataType type, const std::byte* a, const std::byte* b,
                    std::byte* out, uint64_t count);

/// Whether `bytes` at `a` and at `b` overlap without being the same memory: what Reduce
/// does not allow, and where copying in pieces could read what an earlier piece wrote.
inline bool PartlyOverlap(const std::byte* a, const std::byte* b, uint64_t bytes) {
  return a != b && a < b + bytes && b < a + bytes;
}

/// Reduce without float16's F16C kernel: float16 through the portable conversions, in the
/// best build of them this CPU has. For tests, which run where Reduce takes the F16C
/// kernel.
absl::Status ReducePortable(ReduceOp op, DataType type, const std::byte* a, const std::byte* b,
                            std::byte* out, uint64_t count);

/// IEEE binary16 bits to float (exact).
float HalfToFloat(uint16_t bits);
/// float to IEEE binary16 bits, rounding to nearest even; overflow gives infinity, NaN
/// stays NaN.
uint16_t FloatToHalf(float value);
/// bfloat16 bits to float (exact).
float BfloatToFloat(uint16_t bits);
/// float to bfloat16 bits, rounding to nearest even; NaN stays NaN.
uint16_t FloatToBfloat(float value);

}  // namespace cclo::hw::emu
