#include "client/run/options.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "firmware/registry.h"

namespace cclo::run {
namespace {

// The reductions whose results stay exact on the patterns (prod would overflow).
constexpr hw::ReduceOp kRunReduceOps[] = {hw::ReduceOp::kSum, hw::ReduceOp::kMax,
                                          hw::ReduceOp::kMin};

// Largest magnitude of a pattern value (check.h).
constexpr int64_t kPatternMagnitude = 30;

// The largest integer up to which `type` holds every integer, for the float types whose
// range a sum over many ranks can leave; 0 for the others (integers wrap like the reference).
int64_t ExactIntegerLimit(hw::DataType type) {
  switch (type) {
    case hw::DataType::kFloat16:
      return 2048;
    case hw::DataType::kBfloat16:
      return 256;
    default:
      return 0;
  }
}

absl::Status FlagError(const std::string& flag, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", problem));
}

template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseChoice(const std::string& flag, const std::string& text,
                                 const Enum (&choices)[N], std::string (*name)(Enum)) {
  std::string valid;
  for (Enum choice : choices) {
    if (name(choice) == text) return choice;
    absl::StrAppend(&valid, valid.empty() ? "" : ", ", name(choice));
  }
  return FlagError(flag, absl::StrCat("'", text, "' is not one of ", valid));
}

std::string DataTypeText(hw::DataType type) { return std::string(hw::DataTypeName(type)); }
std::string ReduceOpText(hw::ReduceOp op) { return std::string(hw::ReduceOpName(op)); }

}  // namespace

std::string OpName(Op op) {
  if (op == Op::kSendRecv) return "sendrecv";
  return std::string(hw::CollectiveName(CollectiveOf(op)));
}

hw::Collective CollectiveOf(Op op) {
  switch (op) {
    case Op::kSendRecv:
      return hw::Collective::kRecv;
    case Op::kBcast:
      return hw::Collective::kBcast;
    case Op::kScatter:
      return hw::Collective::kScatter;
    case Op::kGather:
      return hw::Collective::kGather;
    case Op::kAllgather:
      return hw::Collective::kAllgather;
    case Op::kReduce:
      return hw::Collective::kReduce;
    case Op::kAllreduce:
      return hw::Collective::kAllreduce;
    case Op::kReduceScatter:
      return hw::Collective::kReduceScatter;
    case Op::kAlltoall:
      return hw::Collective::kAlltoall;
    case Op::kBarrier:
      return hw::Collective::kBarrier;
  }
  return hw::Collective::kNop;
}

absl::StatusOr<std::vector<uint64_t>> ParseByteSizes(const std::string& text) {
  std::vector<uint64_t> sizes;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    absl::StatusOr<uint64_t> size = hw::ParseByteSize(std::string(item));
    if (!size.ok()) return size.status();
    sizes.push_back(*size);
  }
  return sizes;
}

absl::StatusOr<std::vector<Op>> ParseOps(const std::string& text) {
  if (text == "all") return std::vector<Op>(std::begin(kOps), std::end(kOps));
  std::vector<Op> ops;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    absl::StatusOr<Op> op = ParseChoice("ops", std::string(item), kOps, &OpName);
    if (!op.ok()) return op.status();
    ops.push_back(*op);
  }
  return ops;
}

absl::StatusOr<std::vector<hw::DataType>> ParseDataTypes(const std::string& text) {
  std::vector<hw::DataType> datatypes;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    absl::StatusOr<hw::DataType> datatype =
        ParseChoice("datatype", std::string(item), kRunDataTypes, &DataTypeText);
    if (!datatype.ok()) return datatype.status();
    datatypes.push_back(*datatype);
  }
  return datatypes;
}

absl::StatusOr<std::vector<uint32_t>> ParseRoots(const std::string& text, uint32_t size) {
  std::vector<uint32_t> roots;
  if (text == "all") {
    for (uint32_t root = 0; root < size; ++root) roots.push_back(root);
    return roots;
  }
  uint32_t root = 0;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(text, &root) || root >= size) {
    return FlagError("root", absl::StrCat("'", text, "' is not a rank in [0, ", size,
                                          ") for --size ", size, " or 'all'"));
  }
  return std::vector<uint32_t>{root};
}

absl::Status CheckSumsExact(hw::DataType type, uint32_t ranks) {
  const int64_t limit = ExactIntegerLimit(type);
  if (limit == 0 || kPatternMagnitude * ranks <= limit) return absl::OkStatus();
  const std::string name = DataTypeText(type);
  return absl::InvalidArgumentError(
      absl::StrCat(name, " sums over ", ranks, " ranks may exceed ", limit, ", beyond which ", name,
                   " misses integers; use at most ", limit / kPatternMagnitude, " ranks"));
}

absl::StatusOr<RunOptions> ValidateRunArguments(const RunArguments& arguments) {
  RunOptions options;
  if (arguments.runtime_dir.empty()) return FlagError("runtime-dir", "is required");
  if (arguments.token.empty()) return FlagError("token", "is required");
  if (arguments.size < 1 || arguments.size > std::numeric_limits<uint32_t>::max()) {
    return FlagError("size", absl::StrCat(arguments.size, " is not a world size (1 to ",
                                          std::numeric_limits<uint32_t>::max(), ")"));
  }
  if (arguments.rank < 0 || arguments.rank >= arguments.size) {
    return FlagError("rank", absl::StrCat(arguments.rank, " is not in [0, ", arguments.size,
                                          ") for --size ", arguments.size));
  }
  if (arguments.iters < 1 || arguments.iters > std::numeric_limits<uint32_t>::max()) {
    return FlagError("iters", absl::StrCat(arguments.iters, " is not 1 to ",
                                           std::numeric_limits<uint32_t>::max()));
  }
  absl::StatusOr<std::vector<Op>> ops = ParseOps(arguments.ops);
  if (!ops.ok()) return ops.status();
  if (arguments.size == 1 && std::find(ops->begin(), ops->end(), Op::kSendRecv) != ops->end()) {
    return FlagError("ops", "sendrecv needs --size 2 or more (a rank does not send to itself)");
  }
  absl::StatusOr<std::vector<uint64_t>> sizes = ParseByteSizes(arguments.sizes);
  if (!sizes.ok()) return FlagError("sizes", std::string(sizes.status().message()));
  absl::StatusOr<std::vector<hw::DataType>> datatypes = ParseDataTypes(arguments.datatype);
  if (!datatypes.ok()) return datatypes.status();
  absl::StatusOr<hw::ReduceOp> reduce_op =
      ParseChoice("reduce-op", arguments.reduce_op, kRunReduceOps, &ReduceOpText);
  if (!reduce_op.ok()) return reduce_op.status();
  absl::StatusOr<std::vector<uint32_t>> roots =
      ParseRoots(arguments.root, static_cast<uint32_t>(arguments.size));
  if (!roots.ok()) return roots.status();
  const bool sums =
      *reduce_op == hw::ReduceOp::kSum &&
      std::any_of(ops->begin(), ops->end(), [](Op op) { return hw::Reduces(CollectiveOf(op)); });
  for (hw::DataType datatype : *datatypes) {
    absl::Status exact = CheckSumsExact(datatype, static_cast<uint32_t>(arguments.size));
    if (sums && !exact.ok()) {
      return FlagError("datatype", absl::StrCat(exact.message(), " or --reduce-op max or min"));
    }
  }
  options.runtime_dir = arguments.runtime_dir;
  options.token = arguments.token;
  options.rank = static_cast<uint32_t>(arguments.rank);
  options.size = static_cast<uint32_t>(arguments.size);
  options.ops = *std::move(ops);
  options.sizes = *std::move(sizes);
  options.datatypes = *std::move(datatypes);
  options.reduce_op = *reduce_op;
  options.iters = static_cast<uint32_t>(arguments.iters);
  options.roots = *std::move(roots);
  options.in_place = arguments.in_place;
  options.algorithm = arguments.algorithm;
  options.join_timeout = absl::Seconds(arguments.join_timeout_seconds);
  options.op_timeout = absl::Seconds(arguments.op_timeout_seconds);
  options.table = arguments.table;
  return options;
}

std::vector<std::string> AlgorithmsOf(const RunOptions& options, Op op) {
  if (options.algorithm != kEveryAlgorithm) {
    return {op == Op::kSendRecv ? std::string() : options.algorithm};
  }
  std::vector<std::string> names;
  for (const firmware::Algorithm* algorithm : firmware::ForCollective(CollectiveOf(op))) {
    names.emplace_back(algorithm->name);
  }
  return names;
}

std::vector<std::optional<uint32_t>> RootsOf(const RunOptions& options, Op op) {
  if (!hw::HasRoot(CollectiveOf(op))) return {std::nullopt};
  return {options.roots.begin(), options.roots.end()};
}

std::vector<uint64_t> SizesOf(const RunOptions& options, Op op, hw::DataType datatype) {
  if (op == Op::kBarrier) return {0};
  const uint64_t element = hw::DataTypeSize(datatype);
  std::vector<uint64_t> sizes;
  for (uint64_t bytes : options.sizes) sizes.push_back(bytes - bytes % element);
  return sizes;
}

}  // namespace cclo::run
