// gloo-bench: cclo-bench's Gloo baseline, one rank (bench/baselines.cc starts one process
// per rank). The ranks meet in a file store and connect a full mesh over TCP on loopback,
// then run the sweep's allreduce (ring), bcast (from rank 0) and allgather on float32 (sum),
// printing each size's times.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include "bench/rank_program.h"
#include "client/cli.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace cclo::bench {
namespace {

constexpr std::chrono::minutes kOpTimeout{2};

int Main(int argc, char** argv) {
  CLI::App app{"one rank of cclo-bench's Gloo baseline", "gloo-bench"};
  RankArguments arguments;
  int rank = 0, ranks = 1;
  std::string store_dir;
  AddRankOptions(app, arguments);
  app.add_option("--rank", rank, "this process's rank")->required();
  app.add_option("--size", ranks, "number of ranks")->required();
  app.add_option("--store-dir", store_dir, "directory of the rendezvous file store")->required();
  if (auto code = client::ParseCommandLine(app, argc, argv, std::cout, std::cerr)) return *code;
  absl::StatusOr<uint64_t> elements = MostElements(arguments);
  if (!elements.ok()) {
    std::fprintf(stderr, "gloo-bench: %s\n", std::string(elements.status().message()).c_str());
    return 2;
  }
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, ranks);
  context->setTimeout(kOpTimeout);
  context->connectFullMesh(store, device);

  std::vector<float> send(*elements, 1.0f), recv(*elements, 1.0f);
  RankStack stack;
  stack.rank = rank;
  stack.ranks = ranks;
  stack.send = send.data();
  stack.recv = recv.data();
  stack.run = [&](Op op, uint64_t count) {
    if (op == Op::kAllreduce) {
      gloo::AllreduceOptions options(context);
      options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      options.setInput(send.data(), count);
      options.setOutput(recv.data(), count);
      void (*sum)(void*, const void*, const void*, size_t) = &gloo::sum<float>;
      options.setReduceFunction(sum);
      gloo::allreduce(options);
    } else if (op == Op::kBcast) {
      gloo::BroadcastOptions options(context);
      options.setOutput(recv.data(), count);
      options.setRoot(0);
      gloo::broadcast(options);
    } else if (op == Op::kAllgather) {
      gloo::AllgatherOptions options(context);
      options.setInput(send.data(), count);
      options.setOutput(recv.data(), count * ranks);
      gloo::allgather(options);
    }
  };
  stack.barrier = [&] {
    gloo::BarrierOptions options(context);
    gloo::barrier(options);
  };
  stack.report = [](Op op, uint64_t size, const std::vector<double>& micros) {
    std::printf("%s\n", TimesLine(op, size, micros).c_str());
    std::fflush(stdout);
  };
  absl::Status status = RunRankSweep(arguments, stack);
  if (!status.ok()) {
    std::fprintf(stderr, "gloo-bench: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace cclo::bench

int main(int argc, char** argv) { return cclo::bench::Main(argc, argv); }
