#include "bench/cclo_worker.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "bench/check.h"
#include "bench/daemon_pid.h"
#include "cclo/client.h"
#include "client/rpc_path.h"
#include "client/run/check.h"
#include "client/run/execute.h"
#include "hw/process.h"

namespace cclo::bench {
namespace {

constexpr uint32_t kSendTag = 2;
constexpr uint32_t kAckTag = 3;

absl::StatusOr<double> DaemonsCpuSeconds(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t pid : pids) {
    absl::StatusOr<hw::ProcessStat> stat = hw::ReadProcessStat(pid);
    if (!stat.ok()) return stat.status();
    total += stat->cpu_seconds;
  }
  return total;
}

class Worker {
 public:
  Worker(const WorkerOptions& options, Communicator& comm, Buffer& send, Buffer& recv)
      : options_(options), comm_(comm), send_(send), recv_(recv) {}

  absl::Status RunSize(Op op, uint64_t count) {
    const run::OpShape shape =
        FillShape(op, options_.datatype, options_.rank, options_.size, count);
    const uint64_t size = SizeOf(op, count, options_.size, hw::DataTypeSize(options_.datatype));
    const std::string label = absl::StrCat(OpName(op), " ", size);
    if (!IsNop(op)) run::FillBuffers(shape, ++salt_, send_.data(), recv_.data());
    std::vector<double> micros;
    std::optional<run::Mismatch> mismatch;
    absl::StatusOr<double> cpu_seconds =
        IsNop(op) ? RunInTurns(op, shape, micros) : RunTogether(op, shape, micros, mismatch);
    if (!cpu_seconds.ok()) return Failed(label, cpu_seconds.status());
    std::printf("%s\n", TimesLine(op, size, micros).c_str());
    if (options_.rank == 0) std::printf("cpu %s %.3f\n", label.c_str(), *cpu_seconds);
    if (options_.check && !IsNop(op)) {  // a nop has no output to check
      std::printf("check %s %s\n", label.c_str(),
                  mismatch ? MismatchText(options_.rank, *mismatch).c_str() : "ok");
    }
    std::fflush(stdout);
    return absl::OkStatus();
  }

 private:
  // Every rank at once, as the op involves them all: warm-up, a barrier, the timed
  // iterations, a barrier. Returns the daemons' CPU seconds between the barriers.
  absl::StatusOr<double> RunTogether(Op op, const run::OpShape& shape, std::vector<double>& micros,
                                     std::optional<run::Mismatch>& mismatch) {
    if (absl::Status status = WarmUp(op, shape); !status.ok()) return status;
    if (absl::Status status = comm_.Barrier(Timeout()); !status.ok()) return status;
    absl::StatusOr<double> cpu_before = DaemonsCpuSeconds(CpuPids());
    if (!cpu_before.ok()) return cpu_before.status();
    if (absl::Status status = TimeIterations(op, shape, micros, mismatch); !status.ok()) {
      return status;
    }
    if (absl::Status status = comm_.Barrier(Timeout()); !status.ok()) return status;
    return CpuSecondsSince(*cpu_before);
  }

  // Ranks take turns: rank 0 warms up and times its nops while every other rank waits in a
  // barrier, then rank 1, and so on. A nop involves no other rank, and on 2 cores the other
  // ranks' spinning clients and daemons would share the cores with this rank's: the figure
  // would measure CPU contention, not the round trip. Returns the daemons' CPU seconds
  // from the barrier before the first turn to the one after the last.
  absl::StatusOr<double> RunInTurns(Op op, const run::OpShape& shape, std::vector<double>& micros) {
    std::optional<run::Mismatch> unchecked;  // a nop has no output
    if (absl::Status status = comm_.Barrier(Timeout()); !status.ok()) return status;
    absl::StatusOr<double> cpu_before = DaemonsCpuSeconds(CpuPids());
    if (!cpu_before.ok()) return cpu_before.status();
    for (uint32_t turn = 0; turn < options_.size; ++turn) {
      if (turn == options_.rank) {
        if (absl::Status status = WarmUp(op, shape); !status.ok()) return status;
        if (absl::Status status = TimeIterations(op, shape, micros, unchecked); !status.ok()) {
          return status;
        }
      }
      if (absl::Status status = comm_.Barrier(TurnTimeout()); !status.ok()) return status;
    }
    return CpuSecondsSince(*cpu_before);
  }

  absl::Status WarmUp(Op op, const run::OpShape& shape) {
    for (uint32_t i = 0; i < options_.warmup; ++i) {
      if (absl::Status status = RunOnce(op, shape); !status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // Appends the time of each timed iteration to `micros`. With --check (ops with an
  // output), fills the inputs before and checks the output after each iteration (send:
  // at the receiving ranks; every rank fills, keeping the salts in step), untimed,
  // keeping the first mismatch.
  absl::Status TimeIterations(Op op, const run::OpShape& shape, std::vector<double>& micros,
                              std::optional<run::Mismatch>& mismatch) {
    const bool check = options_.check && !IsNop(op);
    const std::optional<run::OpShape> expected =
        CheckShape(op, options_.datatype, options_.rank, options_.size, shape.count);
    for (uint32_t i = 0; i < options_.iters; ++i) {
      if (check) run::FillBuffers(shape, ++salt_, send_.data(), recv_.data());
      const absl::Time start = absl::Now();
      if (absl::Status status = RunOnce(op, shape); !status.ok()) return status;
      micros.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      if (check && expected && !mismatch) {
        mismatch = run::FindMismatch(*expected, recv_.data(), salt_);
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<double> CpuSecondsSince(double before) const {
    absl::StatusOr<double> after = DaemonsCpuSeconds(CpuPids());
    if (!after.ok()) return after.status();
    return *after - before;
  }

  absl::Status RunOnce(Op op, const run::OpShape& shape) {
    if (op == Op::kNop) return comm_.Nop(Timeout());
    if (op == Op::kNopGrpc) return client::RpcPath::Nop(comm_, options_.op_timeout);
    if (op == Op::kSend) return SendOneWay(shape);
    OpOptions options = Timeout();
    if (op != Op::kSendRecv) options.algorithm = options_.algorithm;
    return run::Execute(comm_, shape, options, send_, recv_);
  }

  // Rank k of the first half sends to rank k + size / 2 (on another daemon where the
  // ranks' placement allows: they are placed in blocks), which answers with an empty
  // message, so an iteration ends once the message arrived, also when it went eager. The
  // last of an odd number of ranks has nothing to do.
  absl::Status SendOneWay(const run::OpShape& shape) {
    if (Receives()) {
      absl::Status received =
          comm_.Recv(recv_, 0, shape.count, shape.datatype, Partner(), kSendTag, Timeout());
      if (!received.ok()) return received;
      return comm_.Send(send_, 0, 0, shape.datatype, Partner(), kAckTag, Timeout());
    }
    if (options_.rank == 2 * Half()) return absl::OkStatus();
    absl::Status sent =
        comm_.Send(send_, 0, shape.count, shape.datatype, Partner(), kSendTag, Timeout());
    if (!sent.ok()) return sent;
    return comm_.Recv(recv_, 0, 0, shape.datatype, Partner(), kAckTag, Timeout());
  }

  uint32_t Half() const { return options_.size / 2; }
  bool Receives() const { return options_.rank >= Half() && options_.rank < 2 * Half(); }
  uint32_t Partner() const { return Receives() ? options_.rank - Half() : options_.rank + Half(); }

  OpOptions Timeout() const {
    OpOptions options;
    options.timeout = options_.op_timeout;
    return options;
  }

  // A rank waiting for another's turn waits as long as that turn may take: each of its
  // warm-up and timed ops ends by op_timeout.
  OpOptions TurnTimeout() const {
    OpOptions options;
    options.timeout = options_.op_timeout * (int64_t{options_.warmup} + options_.iters + 1);
    return options;
  }

  // Only rank 0 reads the daemons' CPU time.
  std::vector<pid_t> CpuPids() const {
    return options_.rank == 0 ? options_.daemon_pids : std::vector<pid_t>{};
  }

  absl::Status Failed(const std::string& label, const absl::Status& status) const {
    return absl::Status(status.code(),
                        absl::StrCat("rank ", options_.rank, ": ", label, ": ", status.message()));
  }

  const WorkerOptions& options_;
  Communicator& comm_;
  Buffer& send_;
  Buffer& recv_;
  uint64_t salt_ = 0;
};

// Bytes each buffer needs for every op at the largest size.
uint64_t BufferBytes(const WorkerOptions& options) {
  uint64_t most = 1;  // the daemon does not make empty buffers
  const uint64_t largest = *std::max_element(options.sizes.begin(), options.sizes.end());
  for (Op op : options.ops) {
    if (IsNop(op)) continue;
    const uint64_t count = CountOf(op, largest, options.size, hw::DataTypeSize(options.datatype));
    const run::BufferElements elements =
        run::ElementsOf(FillShape(op, options.datatype, options.rank, options.size, count));
    most = std::max({most, elements.send * hw::DataTypeSize(options.datatype),
                     elements.recv * hw::DataTypeSize(options.datatype)});
  }
  return most;
}

}  // namespace

absl::Status RunWorker(const WorkerOptions& options) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(options.runtime_dir);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      (*client)->Join(options.token, options.rank, options.size);
  if (!comm.ok()) return comm.status();
  const uint64_t bytes = BufferBytes(options);
  absl::StatusOr<Buffer> send = (*client)->AllocBuffer(bytes);
  if (!send.ok()) return send.status();
  absl::StatusOr<Buffer> recv = (*client)->AllocBuffer(bytes);
  if (!recv.ok()) return recv.status();
  Worker worker(options, **comm, *send, *recv);
  for (Op op : options.ops) {
    for (uint64_t count :
         CountsOf(op, options.sizes, options.size, hw::DataTypeSize(options.datatype))) {
      if (absl::Status status = worker.RunSize(op, count); !status.ok()) return status;
    }
  }
  // Leave before exiting: an exit breaks the communicator for ranks still finishing.
  return (*comm)->Destroy();
}

}  // namespace cclo::bench
