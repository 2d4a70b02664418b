// reduce-kernel: the engine's sum kernels (hw/emu/reduce.h) for float32, float16 and
// bfloat16 against memcpy on buffers as large, the memory limit (issue 6: the kernels
// should reach 0.8x memcpy). Every case reports bytes of the destination written per
// second; a kernel reads two sources (out = out + in, as the engine reduces an arriving
// segment into a buffer), memcpy one.
//
//   bazel build //bench:reduce-kernel && bazel-bin/bench/reduce-kernel
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "hw/emu/reduce.h"

namespace cclo::bench {
namespace {

// `bytes` of `type` elements: in holds 1 and out 2. Adding 1 forever stays finite in
// every type (float16 stops at 2048, bfloat16 at 256): no infinities, no subnormals.
struct Buffers {
  Buffers(size_t bytes, hw::DataType type) : in(bytes), out(bytes) {
    Fill(in, type, 1.0f);
    Fill(out, type, 2.0f);
  }
  static void Fill(std::vector<std::byte>& buffer, hw::DataType type, float value) {
    const uint16_t half = hw::emu::FloatToHalf(value);
    const uint16_t bfloat = hw::emu::FloatToBfloat(value);
    const void* element = type == hw::DataType::kFloat16    ? static_cast<const void*>(&half)
                          : type == hw::DataType::kBfloat16 ? static_cast<const void*>(&bfloat)
                                                            : static_cast<const void*>(&value);
    const size_t size = hw::DataTypeSize(type);
    for (size_t at = 0; at + size <= buffer.size(); at += size) {
      std::memcpy(buffer.data() + at, element, size);
    }
  }
  std::vector<std::byte> in, out;
};

void Memcpy(benchmark::State& state) {
  Buffers buffers(state.range(0), hw::DataType::kFloat32);
  for (auto _ : state) {
    std::memcpy(buffers.out.data(), buffers.in.data(), state.range(0));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void ReduceSum(benchmark::State& state, hw::DataType type) {
  Buffers buffers(state.range(0), type);
  const uint64_t count = buffers.out.size() / hw::DataTypeSize(type);
  for (auto _ : state) {
    if (!hw::emu::Reduce(hw::ReduceOp::kSum, type, buffers.out.data(), buffers.in.data(),
                         buffers.out.data(), count)
             .ok()) {
      state.SkipWithError("reduce failed");
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

BENCHMARK(Memcpy)->RangeMultiplier(16)->Range(64 << 10, 64 << 20);
BENCHMARK_CAPTURE(ReduceSum, float32, hw::DataType::kFloat32)
    ->RangeMultiplier(16)
    ->Range(64 << 10, 64 << 20);
BENCHMARK_CAPTURE(ReduceSum, float16, hw::DataType::kFloat16)
    ->RangeMultiplier(16)
    ->Range(64 << 10, 64 << 20);
BENCHMARK_CAPTURE(ReduceSum, bfloat16, hw::DataType::kBfloat16)
    ->RangeMultiplier(16)
    ->Range(64 << 10, 64 << 20);

}  // namespace
}  // namespace cclo::bench

BENCHMARK_MAIN();
