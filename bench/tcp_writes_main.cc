// tcp-writes: one loopback TCP stream, a writer thread and a reader thread, as a data
// session carries a large message: the writer sends from a buffer (first argument: write
// size; second: buffer size) in writes of that size, the reader reads into another
// buffer as large in reads of at most 1 MiB. With 64 MiB buffers it shows how much the
// write size alone costs the kernel's path (the choice of poe::kTurnBytes); with 1 MiB
// ones, which stay in the cache, it is what iperf3 measures (one 1 MiB buffer written
// over and over). docs/performance-log.md, "Turns of 1 MiB"; it reports bytes moved per
// second.
//
//   bazel build //bench:tcp-writes && bazel-bin/bench/tcp-writes
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/loopback.h"
#include "benchmark/benchmark.h"

namespace cclo::bench {
namespace {

constexpr size_t kReadBytes = 1 << 20;
constexpr size_t kStreamBytes = 1ull << 30;  // per iteration

// Reads `bytes` from `fd` into `buffer` (wrapping around); false on error or end.
bool ReadStream(int fd, std::vector<char>& buffer, size_t bytes) {
  size_t offset = 0;
  while (bytes > 0) {
    const size_t want = std::min({kReadBytes, buffer.size() - offset, bytes});
    const ssize_t n = read(fd, buffer.data() + offset, want);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes -= static_cast<size_t>(n);
    offset = (offset + static_cast<size_t>(n)) % buffer.size();
  }
  return true;
}

void LoopbackWrites(benchmark::State& state) {
  const size_t write_bytes = static_cast<size_t>(state.range(0));
  const size_t buffer_bytes = static_cast<size_t>(state.range(1));
  const auto [writer, reader] = LoopbackPair();
  if (writer < 0) {
    state.SkipWithError("no loopback connection");
    return;
  }
  std::vector<char> source(buffer_bytes, 1), destination(buffer_bytes, 2);
  for (auto _ : state) {
    bool read_ok = false;
    std::thread receiver([&] { read_ok = ReadStream(reader, destination, kStreamBytes); });
    size_t left = kStreamBytes, offset = 0;
    while (left > 0) {
      const size_t want = std::min({write_bytes, buffer_bytes - offset, left});
      const ssize_t n = write(writer, source.data() + offset, want);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      left -= static_cast<size_t>(n);
      offset = (offset + static_cast<size_t>(n)) % buffer_bytes;
    }
    if (left > 0) shutdown(writer, SHUT_WR);  // the reader sees the end instead of waiting
    receiver.join();
    if (left > 0 || !read_ok) {
      state.SkipWithError("the stream broke");
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * kStreamBytes);
  close(writer);
  close(reader);
}

BENCHMARK(LoopbackWrites)
    ->ArgsProduct({{64 << 10, 256 << 10, 1 << 20, 4 << 20}, {64 << 20}})
    ->Args({1 << 20, 1 << 20})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace cclo::bench

BENCHMARK_MAIN();
