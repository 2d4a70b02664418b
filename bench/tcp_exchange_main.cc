// tcp-exchange: two threads, each driving nonblocking loopback sockets from one poll loop
// as an engine thread does (writes of at most 1 MiB, poe::kTurnBytes), exchange a message
// of the first argument's size both ways at once, over one TCP connection used in both
// directions (second argument 1, what a data session between two daemons is) or over two,
// one per direction (2). Each iteration is one exchange: this side has sent its message
// and received the other's. docs/performance-log.md, "One connection or two for an
// exchange both ways".
//
//   bazel build //bench:tcp-exchange && bazel-bin/bench/tcp-exchange
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "bench/loopback.h"
#include "benchmark/benchmark.h"

namespace cclo::bench {
namespace {

constexpr int kIterations = 300;
constexpr size_t kWriteBytes = 1 << 20;

// A connected loopback pair, nonblocking with TCP_NODELAY as a data session's socket is:
// {connector, acceptor}, or {-1, -1}.
std::pair<int, int> NonblockingPair() {
  const std::pair<int, int> pair = LoopbackPair();
  const int one = 1;
  for (int fd : {pair.first, pair.second}) {
    if (fd >= 0 && (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
                    fcntl(fd, F_SETFL, O_NONBLOCK) != 0)) {
      close(pair.first);
      close(pair.second);
      return {-1, -1};
    }
  }
  return pair;
}

// Sends `source` on `out` while it receives as many bytes on `in` (possibly the same fd),
// from one poll loop; false on error or end of stream.
bool Exchange(int out, int in, const std::vector<char>& source, std::vector<char>& destination) {
  const size_t bytes = source.size();
  size_t sent = 0, received = 0;
  while (sent < bytes || received < bytes) {
    pollfd fds[2] = {{out, static_cast<short>(sent < bytes ? POLLOUT : 0), 0},
                     {in, static_cast<short>(received < bytes ? POLLIN : 0), 0}};
    if (out == in) fds[0].events |= fds[1].events;
    if (poll(fds, out == in ? 1 : 2, -1) < 0 && errno != EINTR) return false;
    if (sent < bytes) {
      const ssize_t n =
          send(out, source.data() + sent, std::min(bytes - sent, kWriteBytes), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
      if (n > 0) sent += static_cast<size_t>(n);
    }
    if (received < bytes) {
      const ssize_t n = recv(in, destination.data() + received, bytes - received, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
      if (n > 0) received += static_cast<size_t>(n);
    }
  }
  return true;
}

void LoopbackExchange(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  const bool two_connections = state.range(1) == 2;
  // A writes on a_out and reads on a_in; B likewise. One connection: the same socket.
  const std::pair<int, int> forward = NonblockingPair();
  const std::pair<int, int> back = two_connections ? NonblockingPair() : std::make_pair(-1, -1);
  const int a_out = forward.first, b_in = forward.second;
  const int b_out = two_connections ? back.first : b_in,
            a_in = two_connections ? back.second : a_out;
  auto close_all = [&] {
    for (int fd : {forward.first, forward.second, back.first, back.second}) {
      if (fd >= 0) close(fd);
    }
  };
  if (a_out < 0 || b_out < 0) {
    close_all();
    state.SkipWithError("no loopback connection");
    return;
  }
  std::vector<char> a_source(bytes, 1), a_destination(bytes), b_source(bytes, 2),
      b_destination(bytes);
  // Each side ends its streams when it fails, so that the other does not wait for the
  // rest of its exchanges.
  auto end_streams = [](int out, int in) {
    for (int fd : {out, in}) shutdown(fd, SHUT_RDWR);
  };
  bool peer_ok = true;
  std::thread peer([&, rounds = state.max_iterations] {
    for (benchmark::IterationCount i = 0; i < rounds && peer_ok; ++i) {
      peer_ok = Exchange(b_out, b_in, b_source, b_destination);
    }
    if (!peer_ok) end_streams(b_out, b_in);
  });
  bool ok = true;
  for (auto _ : state) {
    ok = Exchange(a_out, a_in, a_source, a_destination);
    if (!ok) {
      end_streams(a_out, a_in);
      state.SkipWithError("the exchange broke");
      break;
    }
  }
  peer.join();
  if (ok && !peer_ok) state.SkipWithError("the exchange broke");
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  close_all();
}

BENCHMARK(LoopbackExchange)
    ->ArgNames({"bytes", "connections"})
    ->ArgsProduct({{64 << 10, 256 << 10, 1040384, 1 << 20, 2 << 20, 4 << 20}, {1, 2}})
    ->Iterations(kIterations)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace cclo::bench

BENCHMARK_MAIN();
