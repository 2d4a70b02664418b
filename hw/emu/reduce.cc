#include "hw/emu/reduce.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace cclo::hw::emu {
namespace {

// Codecs: how an element is stored and in which type it is computed.
template <typename T>
struct Plain {
  using Storage = T;
  static T Load(T value) { return value; }
  static T Store(T value) { return value; }
};

// The conversions are inlined into every kernel (a plain call cannot be inlined into the
// CPU-specific builds below), so that their loops vectorise.
[[gnu::always_inline]] inline float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  // Normal numbers: rebias the exponent from 15 to 127.
  uint32_t magnitude = ((exponent + 112u) << 23) | (mantissa << 13);
  // Infinity and NaN keep an all-ones exponent and their payload.
  magnitude = exponent == 0x1Fu ? (0x7F800000u | (mantissa << 13)) : magnitude;
  // Zero and subnormals are mantissa * 2^-24, exact in float.
  magnitude =
      exponent == 0 ? std::bit_cast<uint32_t>(static_cast<float>(mantissa) * 0x1p-24f) : magnitude;
  return std::bit_cast<float>(sign | magnitude);
}

[[gnu::always_inline]] inline uint16_t FloatToHalfBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  // Normal results: rebias the exponent from 127 to 15 and round the 13 dropped mantissa
  // bits to nearest even; a carry correctly moves into the exponent.
  const uint32_t normal = (magnitude - 0x38000000u + 0xFFFu + ((magnitude >> 13) & 1u)) >> 13;
  // Subnormal results (below 2^-14): adding 0.5f makes the float's last place worth 2^-24,
  // the half subnormal step, so the FPU rounds to nearest even for us.
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(magnitude) + 0.5f) - 0x3F000000u;
  uint32_t half = magnitude < 0x38800000u ? subnormal : normal;
  // From 65520 (halfway past the largest half, 65504) on, the result is infinity.
  half = magnitude >= 0x477FF000u ? 0x7C00u : half;
  // NaN stays a quiet NaN with the top payload bits.
  half = magnitude > 0x7F800000u ? (0x7E00u | ((magnitude >> 13) & 0x3FFu)) : half;
  return static_cast<uint16_t>(sign | half);
}

[[gnu::always_inline]] inline float BfloatBitsToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

[[gnu::always_inline]] inline uint16_t FloatToBfloatBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  // Round the 16 dropped bits to nearest even; overflow carries into infinity.
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(nan ? ((bits >> 16) | 0x0040u) : rounded);
}

struct Half {
  using Storage = uint16_t;
  [[gnu::always_inline]] static float Load(uint16_t bits) { return HalfBitsToFloat(bits); }
  [[gnu::always_inline]] static uint16_t Store(float value) { return FloatToHalfBits(value); }
};

struct Bfloat {
  using Storage = uint16_t;
  [[gnu::always_inline]] static float Load(uint16_t bits) { return BfloatBitsToFloat(bits); }
  [[gnu::always_inline]] static uint16_t Store(float value) { return FloatToBfloatBits(value); }
};

// Ops. Integer sum and prod run in the unsigned type so that overflow wraps instead of
// being undefined.
struct Sum {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};

struct Prod {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};

struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return (a > b || std::isnan(a)) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return (a < b || std::isnan(a)) ? a : b;
    } else {
      return a < b ? a : b;
    }
  }
};

// One plain loop per (codec, op) over elements [first, end); memcpy keeps unaligned
// buffers well defined and still compiles to vector loads.
template <typename Codec, typename Op>
[[gnu::always_inline]] inline void Elements(const std::byte* a, const std::byte* b, std::byte* out,
                                            uint64_t first, uint64_t end) {
  using Storage = typename Codec::Storage;
  constexpr size_t kSize = sizeof(Storage);
  const Op op;
  for (uint64_t i = first; i < end; ++i) {
    Storage x;
    Storage y;
    std::memcpy(&x, a + i * kSize, kSize);
    std::memcpy(&y, b + i * kSize, kSize);
    const Storage result = Codec::Store(op(Codec::Load(x), Codec::Load(y)));
    std::memcpy(out + i * kSize, &result, kSize);
  }
}

// The elements before `out`'s first cache line boundary go first, so that the vector loop
// stores whole lines where `out` is aligned to its element size (as a collective's buffers
// and segments are): a vector store that splits two lines costs about two. On
// bench/reduce-kernel's heap buffers, off a line, the float32 sum of 64 KiB ran at
// 0.79-0.83 x memcpy without this and 0.98-1.05 x with it (docs/performance-log.md, "The
// reduce kernel's stores").
template <typename Codec, typename Op>
[[gnu::always_inline]] inline void Loop(const std::byte* a, const std::byte* b, std::byte* out,
                                        uint64_t count) {
  constexpr uint64_t kLine = 64;
  const uint64_t to_line = (kLine - reinterpret_cast<uintptr_t>(out) % kLine) % kLine;
  const uint64_t head = std::min(count, to_line / sizeof(typename Codec::Storage));
  Elements<Codec, Op>(a, b, out, 0, head);
  Elements<Codec, Op>(a, b, out, head, count);
}

// The loop is built for several CPUs; the loader picks the best clone the CPU has (an
// ifunc). Buffers up to kCachedBytes stay in a core's cache and take 512-bit vectors where
// the CPU has AVX-512 (x86-64-v4; BUILD asks GCC for them): at 64 KiB about 1.3x faster
// than 256-bit ones. Larger buffers of the plain types stream from L3 or memory and take
// 256-bit vectors at most: there 512-bit ones were 20-30% slower (bench/reduce-kernel at
// 16 and 64 MiB), as each of their loads splits a cache line unless the buffers are
// aligned alike. bfloat16, and float16 without F16C, take the 512-bit build at every size
// (KernelsOf).
template <typename Codec, typename Op>
__attribute__((target_clones("arch=x86-64-v4", "avx2", "default"))) void CachedKernel(
    const std::byte* a, const std::byte* b, std::byte* out, uint64_t count) {
  Loop<Codec, Op>(a, b, out, count);
}

template <typename Codec, typename Op>
__attribute__((target_clones("avx2", "default"))) void StreamingKernel(const std::byte* a,
                                                                       const std::byte* b,
                                                                       std::byte* out,
                                                                       uint64_t count) {
  Loop<Codec, Op>(a, b, out, count);
}

// Two buffers of 512 KiB fill the 1 MiB L2 of an AMD Zen 4 or 5 core; from 1 MiB on the
// 256-bit loop was as fast as the 512-bit one or faster.
constexpr uint64_t kCachedBytes = 512 << 10;

using KernelFn = void (*)(const std::byte*, const std::byte*, std::byte*, uint64_t);

struct Kernels {
  KernelFn cached;
  KernelFn streaming;
};

// The ops on 8 floats, as Sum, Prod, Max and Min do on one.
__attribute__((target("avx2"))) inline __m256 Apply8(Sum, __m256 a, __m256 b) {
  return _mm256_add_ps(a, b);
}
__attribute__((target("avx2"))) inline __m256 Apply8(Prod, __m256 a, __m256 b) {
  return _mm256_mul_ps(a, b);
}
__attribute__((target("avx2"))) inline __m256 Apply8(Max, __m256 a, __m256 b) {
  const __m256 take_a =
      _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, take_a);
}
__attribute__((target("avx2"))) inline __m256 Apply8(Min, __m256 a, __m256 b) {
  const __m256 take_a =
      _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, take_a);
}

// float16 where the CPU has F16C (and AVX2): the hardware converts 8 elements per
// instruction, rounding to nearest even as FloatToHalf does, where the portable
// conversions take some twenty vector instructions each. Each 8 elements of `a` and `b`
// are loaded before their result is stored, so `out` may be `a` or `b`; a NaN comes out
// quiet either way. (16 elements at a time with AVX-512 ran 1.7-1.8x as fast in the cache
// in a separate test, but no faster in the engine's kernel on an AMD EPYC:
// docs/performance-log.md, "Tried: float16 with AVX-512".)
template <typename Op>
__attribute__((target("avx2,f16c"))) void HalfF16cKernel(const std::byte* a, const std::byte* b,
                                                         std::byte* out, uint64_t count) {
  uint64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i),
                     _mm256_cvtps_ph(Apply8(Op{}, x, y), _MM_FROUND_TO_NEAREST_INT));
  }
  Elements<Half, Op>(a, b, out, i, count);
}

bool HasF16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}

// float16 takes the F16C kernel when `f16c`. A kernel that converts is bound by its
// arithmetic, not by memory: the 512-bit build is the faster one at every size (bfloat16
// sum from 1 MiB: 2.5x the 256-bit one).
template <typename Codec, typename Op>
Kernels KernelsOf(bool f16c) {
  if constexpr (std::is_same_v<Codec, Plain<typename Codec::Storage>>) {
    return {&CachedKernel<Codec, Op>, &StreamingKernel<Codec, Op>};
  } else if constexpr (std::is_same_v<Codec, Half>) {
    if (f16c) return {&HalfF16cKernel<Op>, &HalfF16cKernel<Op>};
  }
  return {&CachedKernel<Codec, Op>, &CachedKernel<Codec, Op>};
}

template <typename Codec>
Kernels ForOp(ReduceOp op, bool f16c) {
  switch (op) {
    case ReduceOp::kSum:
      return KernelsOf<Codec, Sum>(f16c);
    case ReduceOp::kProd:
      return KernelsOf<Codec, Prod>(f16c);
    case ReduceOp::kMax:
      return KernelsOf<Codec, Max>(f16c);
    case ReduceOp::kMin:
      return KernelsOf<Codec, Min>(f16c);
  }
  return {};
}

Kernels Select(ReduceOp op, DataType type, bool f16c) {
  switch (type) {
    case DataType::kInt8:
      return ForOp<Plain<int8_t>>(op, f16c);
    case DataType::kUint8:
      return ForOp<Plain<uint8_t>>(op, f16c);
    case DataType::kInt32:
      return ForOp<Plain<int32_t>>(op, f16c);
    case DataType::kInt64:
      return ForOp<Plain<int64_t>>(op, f16c);
    case DataType::kFloat16:
      return ForOp<Half>(op, f16c);
    case DataType::kBfloat16:
      return ForOp<Bfloat>(op, f16c);
    case DataType::kFloat32:
      return ForOp<Plain<float>>(op, f16c);
    case DataType::kFloat64:
      return ForOp<Plain<double>>(op, f16c);
  }
  return {};
}

absl::Status ReduceWith(bool f16c, ReduceOp op, DataType type, const std::byte* a,
                        const std::byte* b, std::byte* out, uint64_t count) {
  const Kernels kernels = Select(op, type, f16c);
  if (kernels.cached == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no reduce kernel for reduce op value ",
                                                   static_cast<int>(op), " and datatype value ",
                                                   static_cast<int>(type)));
  }
  if (count > 0 && (a == nullptr || b == nullptr || out == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce of ", count, " elements given a null buffer pointer"));
  }
  const bool streaming = count > kCachedBytes / DataTypeSize(type);
  (streaming ? kernels.streaming : kernels.cached)(a, b, out, count);
  return absl::OkStatus();
}

}  // namespace

absl::Status Reduce(ReduceOp op, DataType type, const std::byte* a, const std::byte* b,
                    std::byte* out, uint64_t count) {
  return ReduceWith(HasF16c(), op, type, a, b, out, count);
}

absl::Status ReducePortable(ReduceOp op, DataType type, const std::byte* a, const std::byte* b,
                            std::byte* out, uint64_t count) {
  return ReduceWith(false, op, type, a, b, out, count);
}

float HalfToFloat(uint16_t bits) { return HalfBitsToFloat(bits); }

uint16_t FloatToHalf(float value) { return FloatToHalfBits(value); }

float BfloatToFloat(uint16_t bits) { return BfloatBitsToFloat(bits); }

uint16_t FloatToBfloat(float value) { return FloatToBfloatBits(value); }

}  // namespace cclo::hw::emu
