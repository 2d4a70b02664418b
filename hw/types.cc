#include "hw/types.h"

#include "absl/strings/str_cat.h"
#include "hw/crypto.h"

namespace cclo::hw {
namespace {

constexpr std::array<std::string_view, 8> kDataTypeNames = {
    "int8", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"};
constexpr std::array<size_t, 8> kDataTypeSizes = {1, 1, 4, 8, 2, 2, 4, 8};
constexpr std::array<std::string_view, 4> kReduceOpNames = {"sum", "prod", "max", "min"};
constexpr std::array<std::string_view, 5> kCollectiveNames = {"nop", "send", "recv", "bcast",
                                                              "allreduce"};

template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseName(const std::array<std::string_view, N>& names,
                               std::string_view name, std::string_view what) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  std::string valid;
  for (std::string_view n : names) {
    absl::StrAppend(&valid, valid.empty() ? "" : ", ", std::string(n));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", std::string(what), " '",
                                                 std::string(name), "'; valid: ", valid));
}

}  // namespace

size_t DataTypeSize(DataType type) { return kDataTypeSizes.at(static_cast<size_t>(type)); }

std::string_view DataTypeName(DataType type) {
  return kDataTypeNames.at(static_cast<size_t>(type));
}

absl::StatusOr<DataType> ParseDataType(std::string_view name) {
  return ParseName<DataType>(kDataTypeNames, name, "datatype");
}

std::string_view ReduceOpName(ReduceOp op) { return kReduceOpNames.at(static_cast<size_t>(op)); }

absl::StatusOr<ReduceOp> ParseReduceOp(std::string_view name) {
  return ParseName<ReduceOp>(kReduceOpNames, name, "reduce op");
}

std::string_view CollectiveName(Collective collective) {
  return kCollectiveNames.at(static_cast<size_t>(collective));
}

absl::StatusOr<Collective> ParseCollective(std::string_view name) {
  return ParseName<Collective>(kCollectiveNames, name, "collective");
}

std::string CommIdHex(const CommId& id) { return Hex(id.data(), id.size()); }

}  // namespace cclo::hw
