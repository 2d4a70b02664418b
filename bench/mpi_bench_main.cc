// mpi-bench: cclo-bench's Open MPI baseline, one rank of an mpirun (bench/baselines.cc starts
// it). Runs the sweep's ops on float32 (sum) with the MPI collective of the same name;
// sendrecv is MPI_Sendrecv to rank + 1 from rank - 1; send is MPI_Send from rank k to
// k + size / 2, answered by an empty MPI_Send back; reduce_scatter MPI_Reduce_scatter_block.
// Rank 0 prints each size's times, per iteration the slowest rank's.
#include <cstdio>
#include <iostream>
#include <vector>

#include "bench/rank_program.h"
#include "client/cli.h"
#include "mpi/mpi.h"

namespace cclo::bench {
namespace {

int Main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  CLI::App app{"one rank of cclo-bench's Open MPI baseline", "mpi-bench"};
  RankArguments arguments;
  AddRankOptions(app, arguments);
  if (auto code = client::ParseCommandLine(app, argc, argv, std::cout, std::cerr)) {
    MPI_Abort(MPI_COMM_WORLD, *code);
  }
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  absl::StatusOr<uint64_t> elements = MostElements(arguments);
  if (!elements.ok()) {
    std::fprintf(stderr, "mpi-bench: %s\n", std::string(elements.status().message()).c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::vector<float> send(*elements, 1.0f), recv(*elements, 1.0f);
  const int next = (rank + 1) % ranks, previous = (rank + ranks - 1) % ranks, half = ranks / 2;
  RankStack stack;
  stack.rank = rank;
  stack.ranks = ranks;
  stack.send = send.data();
  stack.recv = recv.data();
  stack.run = [&](Op op, uint64_t count) {
    const int n = static_cast<int>(count);
    switch (op) {
      case Op::kSendRecv:
        MPI_Sendrecv(send.data(), n, MPI_FLOAT, next, 0, recv.data(), n, MPI_FLOAT, previous, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
      case Op::kSend:
        if (rank < half) {
          MPI_Send(send.data(), n, MPI_FLOAT, rank + half, 0, MPI_COMM_WORLD);
          MPI_Recv(nullptr, 0, MPI_FLOAT, rank + half, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank < 2 * half) {
          MPI_Recv(recv.data(), n, MPI_FLOAT, rank - half, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(nullptr, 0, MPI_FLOAT, rank - half, 1, MPI_COMM_WORLD);
        }
        break;
      case Op::kBcast:
        MPI_Bcast(recv.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      case Op::kReduce:
        MPI_Reduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
      case Op::kAllreduce:
        MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Op::kAllgather:
        MPI_Allgather(send.data(), n, MPI_FLOAT, recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case Op::kReduceScatter:
        MPI_Reduce_scatter_block(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Op::kAlltoall:
        MPI_Alltoall(send.data(), n, MPI_FLOAT, recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case Op::kNop:
      case Op::kNopGrpc:
        break;
    }
  };
  stack.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  stack.report = [&](Op op, uint64_t size, const std::vector<double>& micros) {
    std::vector<double> slowest(micros.size());
    MPI_Reduce(micros.data(), slowest.data(), static_cast<int>(micros.size()), MPI_DOUBLE, MPI_MAX,
               0, MPI_COMM_WORLD);
    if (rank == 0) std::printf("%s\n", TimesLine(op, size, slowest).c_str());
    std::fflush(stdout);
  };
  absl::Status status = RunRankSweep(arguments, stack);
  if (!status.ok()) {
    std::fprintf(stderr, "mpi-bench: %s\n", std::string(status.message()).c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}

}  // namespace
}  // namespace cclo::bench

int main(int argc, char** argv) { return cclo::bench::Main(argc, argv); }
