#include "bench/options.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/run/options.h"
#include "hw/poe/tcp/engine.h"
#include "hw/types.h"

namespace cclo::bench {
namespace {

constexpr uint64_t kLargestSize = 1ull << 30;
constexpr uint32_t kMostRanks = 64;

absl::StatusOr<uint64_t> ParseSize(const std::string& flag, const std::string& text) {
  absl::StatusOr<uint64_t> size = hw::ParseByteSize(text);
  if (!size.ok())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", size.status().message()));
  if (*size < 1 || *size > kLargestSize) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", text, " is outside 1 to ", kLargestSize, " bytes"));
  }
  return *size;
}

absl::Status InRange(const std::string& flag, int64_t value, int64_t low, int64_t high) {
  if (value >= low && value <= high) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", value, " is outside ", low, " to ", high));
}

/// Whether this kernel lets a socket of this process take congestion control `name`, as
/// the daemons' data sessions would (they run here, as the same user).
absl::Status CheckCongestion(const std::string& name) {
  if (!hw::poe::tcp::IsCongestionName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data-tcp-congestion '", name,
                     "': not a congestion control name (up to 15 letters, digits or '_')"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  absl::Status taken = hw::poe::tcp::SetCongestion(fd, name);
  close(fd);
  if (taken.ok()) return taken;
  return absl::InvalidArgumentError(absl::StrCat("--data-tcp-congestion: ", taken.message()));
}

}  // namespace

std::string BaselineName(Baseline baseline) {
  switch (baseline) {
    case Baseline::kMpi:
      return "mpi";
    case Baseline::kGloo:
      return "gloo";
    case Baseline::kLink:
      return "link";
  }
  return "unknown";
}

absl::StatusOr<BenchOptions> ValidateBenchArguments(const BenchArguments& arguments) {
  BenchOptions options;
  absl::StatusOr<std::vector<Op>> ops = ParseOps(arguments.ops);
  if (!ops.ok()) return absl::InvalidArgumentError(absl::StrCat("--ops: ", ops.status().message()));
  options.ops = *ops;
  absl::StatusOr<uint64_t> min_bytes = ParseSize("--min-bytes", arguments.min_bytes);
  if (!min_bytes.ok()) return min_bytes.status();
  absl::StatusOr<uint64_t> max_bytes = ParseSize("--max-bytes", arguments.max_bytes);
  if (!max_bytes.ok()) return max_bytes.status();
  if (*min_bytes > *max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("--min-bytes ", arguments.min_bytes,
                                                   " exceeds --max-bytes ", arguments.max_bytes));
  }
  if (arguments.step_factor != 2 && arguments.step_factor != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("--step-factor ", arguments.step_factor, " is neither 2 nor 4"));
  }
  options.sizes = SweepSizes(*min_bytes, *max_bytes, arguments.step_factor);
  if (arguments.runtime_dirs) {
    options.runtime_dirs = absl::StrSplit(*arguments.runtime_dirs, ',');
    if (arguments.daemons != -1 &&
        arguments.daemons != static_cast<int64_t>(options.runtime_dirs.size())) {
      return absl::InvalidArgumentError(absl::StrCat("--daemons ", arguments.daemons,
                                                     " but --runtime-dirs names ",
                                                     options.runtime_dirs.size(), " daemons"));
    }
    if (std::any_of(options.runtime_dirs.begin(), options.runtime_dirs.end(),
                    [](const std::string& dir) { return dir.empty(); })) {
      return absl::InvalidArgumentError(
          absl::StrCat("--runtime-dirs '", *arguments.runtime_dirs, "' has an empty entry"));
    }
    // One daemon named twice would be counted as two, in the header and its CPU time.
    for (auto dir = options.runtime_dirs.begin(); dir != options.runtime_dirs.end(); ++dir) {
      if (std::find(options.runtime_dirs.begin(), dir, *dir) != dir) {
        return absl::InvalidArgumentError(
            absl::StrCat("--runtime-dirs '", *arguments.runtime_dirs, "' names ", *dir,
                         " twice; use --ranks-per-daemon for more ranks on a daemon"));
      }
    }
  }
  const int64_t daemons = !options.runtime_dirs.empty() ? options.runtime_dirs.size()
                          : arguments.daemons == -1     ? 2
                                                        : arguments.daemons;
  if (absl::Status status = InRange("--daemons", daemons, 1, kMostRanks); !status.ok()) {
    return status;
  }
  if (absl::Status status =
          InRange("--ranks-per-daemon", arguments.ranks_per_daemon, 1, kMostRanks / daemons);
      !status.ok()) {
    return status;
  }
  options.daemons = daemons;
  options.ranks_per_daemon = arguments.ranks_per_daemon;
  if (!arguments.data_tcp_congestion.empty() && !options.runtime_dirs.empty()) {
    return absl::InvalidArgumentError(
        "--data-tcp-congestion applies to the daemons the bench starts; running daemons "
        "(--runtime-dirs) take data_tcp_congestion from their config");
  }
  if (!arguments.data_tcp_congestion.empty()) {
    if (absl::Status status = CheckCongestion(arguments.data_tcp_congestion); !status.ok()) {
      return status;
    }
  }
  options.data_tcp_congestion = arguments.data_tcp_congestion;
  for (Op op : {Op::kSendRecv, Op::kSend}) {
    if (options.ranks() < 2 &&
        std::find(options.ops.begin(), options.ops.end(), op) != options.ops.end()) {
      return absl::InvalidArgumentError(absl::StrCat(OpName(op), " needs at least 2 ranks"));
    }
  }
  if (absl::Status status = InRange("--warmup", arguments.warmup, 0, 1000000); !status.ok()) {
    return status;
  }
  if (absl::Status status = InRange("--iters", arguments.iters, 1, 1000000); !status.ok()) {
    return status;
  }
  if (absl::Status status = InRange("--rounds", arguments.rounds, 1, 100); !status.ok()) {
    return status;
  }
  options.warmup = arguments.warmup;
  options.iters = arguments.iters;
  options.rounds = arguments.rounds;
  options.check = arguments.check;
  // The daemons name the algorithms there are; here only what cannot be a name.
  if (arguments.algorithm.size() > 31 ||
      arguments.algorithm.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") !=
          std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--algorithm '", arguments.algorithm,
                                                   "' is not an algorithm name (a-z, 0-9, _)"));
  }
  options.algorithm = arguments.algorithm;
  absl::StatusOr<hw::DataType> datatype = hw::ParseDataType(arguments.datatype);
  if (!datatype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--datatype: ", datatype.status().message()));
  }
  options.datatype = *datatype;
  // A size too small for one element per rank is skipped; an op with no size left is refused.
  const uint64_t element = hw::DataTypeSize(options.datatype);
  for (Op op : options.ops) {
    if (!IsNop(op) && CountOf(op, options.sizes.back(), options.ranks(), element) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-bytes ", arguments.max_bytes, " is too small for ", OpName(op), " over ",
          options.ranks(), " ranks: it needs at least ", SizeOf(op, 1, options.ranks(), element),
          " bytes (one ", arguments.datatype, " per rank)"));
    }
  }
  const bool sums = std::any_of(options.ops.begin(), options.ops.end(), [](Op op) {
    return op == Op::kReduce || op == Op::kAllreduce || op == Op::kReduceScatter;
  });
  if (options.check && sums) {
    if (absl::Status exact = run::CheckSumsExact(options.datatype, options.ranks()); !exact.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--check --datatype: ", exact.message(),
                                                     ", or no --check, or no summing op"));
    }
  }
  for (const std::string& name : arguments.baselines) {
    Baseline baseline;
    if (name == "mpi") {
      baseline = Baseline::kMpi;
    } else if (name == "gloo") {
      baseline = Baseline::kGloo;
    } else if (name == "link") {
      baseline = Baseline::kLink;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--baseline '", name, "' is none of mpi, gloo, link"));
    }
    if (baseline != Baseline::kLink && options.datatype != hw::DataType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--baseline ", name, " runs float32 only, not --datatype ", arguments.datatype));
    }
    if (std::find(options.baselines.begin(), options.baselines.end(), baseline) ==
        options.baselines.end()) {
      options.baselines.push_back(baseline);
    }
  }
  options.link_seconds = arguments.link_seconds;
  options.deadline = absl::Seconds(arguments.deadline_seconds);
  return options;
}

}  // namespace cclo::bench
