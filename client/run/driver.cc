#include "client/run/driver.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cclo/client.h"
#include "client/run/check.h"
#include "client/run/execute.h"
#include "client/table.h"
#include "hw/clock.h"

namespace cclo::run {
namespace {

// One run of the table: an op with one algorithm, datatype, root and size.
struct Run {
  Op op;
  std::string algorithm;  // "" for the daemon's choice
  hw::DataType datatype;
  std::optional<uint32_t> root;  // rooted ops
  uint64_t bytes;
};

// One row of the result table: a run over all iterations.
struct Row {
  Run run;
  absl::Duration total;  // sum of the iterations' times
  bool ok = true;        // this rank's checks
};

// "allreduce 64 bytes", "bcast ring 64 bytes of int32 at root 1": a run in messages, with
// its algorithm if one is forced and its datatype if the run has several.
std::string Label(const RunOptions& options, const Run& run) {
  return absl::StrCat(OpName(run.op), run.algorithm.empty() ? "" : " ", run.algorithm, " ",
                      run.bytes, " bytes",
                      options.datatypes.size() > 1
                          ? absl::StrCat(" of ", std::string(hw::DataTypeName(run.datatype)))
                          : "",
                      run.root ? absl::StrCat(" at root ", *run.root) : std::string());
}

// What the reference needs to know about `run` at this rank.
OpShape ShapeOf(const RunOptions& options, const Run& run) {
  const uint32_t root = run.root.value_or(0);
  return {run.op,
          run.datatype,
          options.rank,
          options.size,
          root,
          options.reduce_op,
          run.bytes / hw::DataTypeSize(run.datatype),
          ShapeInPlace(run.op, options.rank, root, options.in_place)};
}

// The communicator, the two buffers every op uses and the run's settings.
class Runner {
 public:
  Runner(const RunOptions& options, Communicator& comm, Buffer& send, Buffer& recv)
      : options_(options), comm_(comm), send_(send), recv_(recv) {}

  // Runs `run` once with inputs of run number `salt`; records the first mismatch.
  absl::StatusOr<absl::Duration> RunOnce(const Run& run, uint64_t salt, bool& ok) {
    const OpShape shape = ShapeOf(options_, run);
    FillBuffers(shape, salt, send_.data(), recv_.data());
    const hw::SteadyTime start = hw::SteadyNow();
    OpOptions op_options;
    op_options.algorithm = run.algorithm;
    op_options.timeout = options_.op_timeout;
    if (absl::Status status = Execute(comm_, shape, op_options, send_, recv_); !status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("rank ", options_.rank, ": ", Label(options_, run), ": ", status.message()));
    }
    const absl::Duration elapsed = hw::SteadyNow() - start;
    std::optional<Mismatch> mismatch = FindMismatch(shape, recv_.data(), salt);
    if (mismatch) {
      ok = false;
      if (first_mismatch_.empty()) {
        first_mismatch_ = absl::StrCat("rank ", options_.rank, ": ", Label(options_, run),
                                       ": mismatch at index ", mismatch->index, ": expected ",
                                       mismatch->expected, " got ", mismatch->got);
      }
    }
    return elapsed;
  }

  // The first mismatch seen, or empty.
  const std::string& first_mismatch() const { return first_mismatch_; }

 private:
  const RunOptions& options_;
  Communicator& comm_;
  Buffer& send_;
  Buffer& recv_;
  std::string first_mismatch_;
};

// Every run of `options`, in order: by op, algorithm, datatype, root, then size.
std::vector<Run> RunsOf(const RunOptions& options) {
  std::vector<Run> runs;
  for (Op op : options.ops) {
    for (const std::string& algorithm : AlgorithmsOf(options, op)) {
      for (hw::DataType datatype : options.datatypes) {
        for (std::optional<uint32_t> root : RootsOf(options, op)) {
          for (uint64_t bytes : SizesOf(options, op, datatype)) {
            runs.push_back({op, algorithm, datatype, root, bytes});
          }
        }
      }
    }
  }
  return runs;
}

// Bytes each of the send and receive buffers needs for every one of `runs` at this rank.
uint64_t BufferBytes(const RunOptions& options, const std::vector<Run>& runs) {
  uint64_t most = 1;  // the daemon does not make empty buffers
  for (const Run& run : runs) {
    const BufferElements elements = ElementsOf(ShapeOf(options, run));
    const uint64_t element = hw::DataTypeSize(run.datatype);
    most = std::max({most, elements.send * element, elements.recv * element});
  }
  return most;
}

std::string RenderRows(const std::vector<Row>& rows, uint32_t iters) {
  std::vector<std::vector<std::string>> cells;
  for (const Row& row : rows) {
    const Run& run = row.run;
    const double micros = absl::ToDoubleMicroseconds(row.total) / iters;
    const double gigabytes_per_second = micros > 0 ? run.bytes / micros / 1e3 : 0;
    cells.push_back({OpName(run.op), run.algorithm.empty() ? "-" : run.algorithm,
                     std::string(hw::DataTypeName(run.datatype)),
                     run.root ? absl::StrCat(*run.root) : "-", absl::StrCat(run.bytes),
                     absl::StrFormat("%.1f", micros), absl::StrFormat("%.3f", gigabytes_per_second),
                     row.ok ? "yes" : "no"});
  }
  return client::RenderTable(
      {"op", "algorithm", "datatype", "root", "bytes", "time_us", "GB/s", "ok"}, cells);
}

}  // namespace

absl::Status PrintToken(const std::string& runtime_dir, absl::Duration timeout, std::ostream& out) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(runtime_dir, timeout);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::string> token = (*client)->CreateCommunicatorId();
  if (!token.ok()) return token.status();
  out << *token << "\n";
  return absl::OkStatus();
}

absl::Status RunChecks(const RunOptions& options, absl::Duration attach_timeout,
                       std::ostream& out) {
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Attach(options.runtime_dir, attach_timeout);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      (*client)->Join(options.token, options.rank, options.size, options.join_timeout);
  if (!comm.ok()) return comm.status();
  const std::vector<Run> runs = RunsOf(options);
  const uint64_t bytes = BufferBytes(options, runs);
  absl::StatusOr<Buffer> send = (*client)->AllocBuffer(bytes);
  if (!send.ok()) return send.status();
  absl::StatusOr<Buffer> recv = (*client)->AllocBuffer(bytes);
  if (!recv.ok()) return recv.status();

  Runner runner(options, **comm, *send, *recv);
  std::vector<Row> rows;
  uint64_t salt = 0;
  for (const Run& run : runs) {
    Row row{run, absl::ZeroDuration()};
    for (uint32_t iter = 0; iter < options.iters; ++iter) {
      absl::StatusOr<absl::Duration> elapsed = runner.RunOnce(run, ++salt, row.ok);
      if (!elapsed.ok()) return elapsed.status();
      row.total += *elapsed;
    }
    rows.push_back(row);
  }
  if (options.table) out << RenderRows(rows, options.iters);
  // Leave the communicator before exiting: a client that just exits breaks it for the ranks
  // on its daemon that may still finish their part of the last op.
  absl::Status left = (*comm)->Destroy();
  if (!runner.first_mismatch().empty()) return absl::DataLossError(runner.first_mismatch());
  return left;
}

}  // namespace cclo::run
