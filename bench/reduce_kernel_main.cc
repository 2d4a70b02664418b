// reduce-kernel: the engine's float32 sum kernel (hw/emu/reduce.h) against memcpy on the
// same buffers, the memory limit (issue 6: the kernel should reach 0.8x memcpy). Both
// report bytes of the destination written per second; the kernel reads two sources
// (out = out + in, as the engine reduces an arriving segment into a buffer), memcpy one.
//
//   bazel build //bench:reduce-kernel && bazel-bin/bench/reduce-kernel
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "hw/emu/reduce.h"

namespace cclo::bench {
namespace {

struct Buffers {
  explicit Buffers(size_t bytes)
      : in(bytes / sizeof(float), 1.0f), out(bytes / sizeof(float), 2.0f) {}
  std::vector<float> in, out;
};

void Memcpy(benchmark::State& state) {
  Buffers buffers(state.range(0));
  for (auto _ : state) {
    std::memcpy(buffers.out.data(), buffers.in.data(), state.range(0));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void ReduceSumFloat32(benchmark::State& state) {
  Buffers buffers(state.range(0));
  auto* out = reinterpret_cast<std::byte*>(buffers.out.data());
  const auto* in = reinterpret_cast<const std::byte*>(buffers.in.data());
  for (auto _ : state) {
    // Adding 1 forever stays finite and exact enough for a benchmark: no denormals.
    if (!hw::emu::Reduce(hw::ReduceOp::kSum, hw::DataType::kFloat32, out, in, out,
                         buffers.out.size())
             .ok()) {
      state.SkipWithError("reduce failed");
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

BENCHMARK(Memcpy)->RangeMultiplier(16)->Range(64 << 10, 64 << 20);
BENCHMARK(ReduceSumFloat32)->RangeMultiplier(16)->Range(64 << 10, 64 << 20);

}  // namespace
}  // namespace cclo::bench

BENCHMARK_MAIN();
