#include "bench/sweep.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace cclo::bench {
namespace {

constexpr Op kEveryOp[] = {Op::kSendRecv,  Op::kSend,      Op::kBcast,         Op::kReduce,
                           Op::kAllreduce, Op::kAllgather, Op::kReduceScatter, Op::kAlltoall,
                           Op::kNop,       Op::kNopGrpc};

// Whether the op's size covers one chunk per rank (its count is per chunk).
bool Chunked(Op op) {
  return op == Op::kAllgather || op == Op::kReduceScatter || op == Op::kAlltoall;
}

}  // namespace

std::string OpName(Op op) {
  switch (op) {
    case Op::kSendRecv:
      return "sendrecv";
    case Op::kSend:
      return "send";
    case Op::kBcast:
      return "bcast";
    case Op::kReduce:
      return "reduce";
    case Op::kAllreduce:
      return "allreduce";
    case Op::kAllgather:
      return "allgather";
    case Op::kReduceScatter:
      return "reduce_scatter";
    case Op::kAlltoall:
      return "alltoall";
    case Op::kNop:
      return "nop";
    case Op::kNopGrpc:
      return "nop_grpc";
  }
  return "unknown";
}

bool IsNop(Op op) { return op == Op::kNop || op == Op::kNopGrpc; }

absl::StatusOr<std::vector<Op>> ParseOps(const std::string& text) {
  if (text == "all") return std::vector<Op>(std::begin(kEveryOp), std::end(kEveryOp));
  std::vector<Op> ops;
  for (absl::string_view name : absl::StrSplit(text, ',')) {
    auto known = std::find_if(std::begin(kEveryOp), std::end(kEveryOp),
                              [&](Op op) { return OpName(op) == name; });
    if (known == std::end(kEveryOp)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown op '", name, "' (ops: sendrecv, send, bcast, reduce, allreduce, allgather, ",
          "reduce_scatter, alltoall, nop, nop_grpc; or all)"));
    }
    if (std::find(ops.begin(), ops.end(), *known) == ops.end()) ops.push_back(*known);
  }
  return ops;
}

double BusFactor(Op op, uint32_t ranks) {
  const double n = ranks;
  if (op == Op::kAllreduce) return 2 * (n - 1) / n;
  if (Chunked(op)) return (n - 1) / n;
  return 1;
}

uint64_t CountOf(Op op, uint64_t bytes, uint32_t ranks, uint64_t element_bytes) {
  if (IsNop(op)) return 0;
  return bytes / element_bytes / (Chunked(op) ? ranks : 1);
}

std::vector<uint64_t> CountsOf(Op op, const std::vector<uint64_t>& sizes, uint32_t ranks,
                               uint64_t element_bytes) {
  if (IsNop(op)) return {0};
  std::vector<uint64_t> counts;
  for (uint64_t size : sizes) {
    const uint64_t count = CountOf(op, size, ranks, element_bytes);
    if (count > 0 && std::find(counts.begin(), counts.end(), count) == counts.end()) {
      counts.push_back(count);
    }
  }
  return counts;
}

uint64_t SizeOf(Op op, uint64_t count, uint32_t ranks, uint64_t element_bytes) {
  return count * element_bytes * (Chunked(op) ? ranks : 1);
}

absl::StatusOr<std::vector<uint64_t>> ParseSizeList(const std::string& text) {
  std::vector<uint64_t> sizes;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    sizes.push_back(0);
    if (!absl::SimpleAtoi(item, &sizes.back())) {
      return absl::InvalidArgumentError(absl::StrCat("size '", item, "' is not a number"));
    }
  }
  return sizes;
}

std::vector<uint64_t> SweepSizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = min_bytes; size <= max_bytes; size *= factor) {
    sizes.push_back(size);
    if (size > max_bytes / factor) break;
  }
  return sizes;
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least `fraction` of the values at or below it.
  const auto rank = static_cast<size_t>(std::ceil(fraction * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

std::string TimesLine(Op op, uint64_t size, const std::vector<double>& micros) {
  return absl::StrCat("times ", OpName(op), " ", size, " ",
                      absl::StrJoin(micros, " ", [](std::string* out, double value) {
                        absl::StrAppend(out, absl::SixDigits(value));
                      }));
}

absl::Status AddTimes(const std::string& output, Timings& timings) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "times ")) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    absl::StatusOr<std::vector<Op>> op = ParseOps(std::string(words.size() > 1 ? words[1] : ""));
    uint64_t size = 0;
    if (words.size() < 4 || !op.ok() || op->size() != 1 || !absl::SimpleAtoi(words[2], &size)) {
      return absl::InvalidArgumentError(absl::StrCat("malformed line '", line, "'"));
    }
    std::vector<double>& slowest = timings[{op->front(), size}];
    for (size_t i = 3; i < words.size(); ++i) {
      double micros = 0;
      if (!absl::SimpleAtod(words[i], &micros)) {
        return absl::InvalidArgumentError(absl::StrCat("malformed time in line '", line, "'"));
      }
      if (slowest.size() < i - 2) slowest.push_back(micros);
      slowest[i - 3] = std::max(slowest[i - 3], micros);
    }
  }
  return absl::OkStatus();
}

}  // namespace cclo::bench
