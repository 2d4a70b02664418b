#include "firmware/registry.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "firmware/allgather/allgather.h"
#include "firmware/allreduce/allreduce.h"
#include "firmware/alltoall/alltoall.h"
#include "firmware/barrier/barrier.h"
#include "firmware/bcast/bcast.h"
#include "firmware/gather/gather.h"
#include "firmware/reduce/reduce.h"
#include "firmware/reduce_scatter/reduce_scatter.h"
#include "firmware/scatter/scatter.h"
#include "firmware/sendrecv/sendrecv.h"
#include "hw/types.h"

namespace cclo::firmware {
namespace {

using hw::Collective;

absl::StatusOr<hw::Program> GenerateNop(const hw::CallDescriptor& /*call*/,
                                        uint32_t /*world_size*/) {
  hw::Program program;
  program.algorithm = "nop";
  return program;
}

constexpr Algorithm kNop{"nop", Collective::kNop, "Does nothing; completes at once.", "none",
                         &GenerateNop};

std::vector<Algorithm> Table() {
  std::vector<Algorithm> table = {kNop};
  for (absl::Span<const Algorithm> algorithms :
       {SendRecvAlgorithms(), BcastAlgorithms(), ScatterAlgorithms(), GatherAlgorithms(),
        AllgatherAlgorithms(), ReduceAlgorithms(), AllreduceAlgorithms(),
        ReduceScatterAlgorithms(), AlltoallAlgorithms(), BarrierAlgorithms()}) {
    table.insert(table.end(), algorithms.begin(), algorithms.end());
  }
  return table;
}

std::string Name(Collective collective) { return std::string(hw::CollectiveName(collective)); }

bool Known(Collective collective) {
  return std::ranges::any_of(AllAlgorithms(), [&](const Algorithm& algorithm) {
    return algorithm.collective == collective;
  });
}

}  // namespace

absl::Span<const Algorithm> AllAlgorithms() {
  static const std::vector<Algorithm>* const table = new std::vector<Algorithm>(Table());
  return *table;
}

const Algorithm* Find(Collective collective, std::string_view name) {
  for (const Algorithm& algorithm : AllAlgorithms()) {
    if (algorithm.collective == collective && algorithm.name == name) return &algorithm;
  }
  return nullptr;
}

std::vector<const Algorithm*> ForCollective(Collective collective) {
  std::vector<const Algorithm*> found;
  for (const Algorithm& algorithm : AllAlgorithms()) {
    if (algorithm.collective == collective) found.push_back(&algorithm);
  }
  return found;
}

uint8_t PlaceOf(const Algorithm& algorithm) {
  uint8_t place = 0;  // counted without a vector: every op's Generate asks
  for (const Algorithm& entry : AllAlgorithms()) {
    place += entry.collective == algorithm.collective;
    if (&entry == &algorithm) break;
  }
  return place;
}

uint8_t PlacesIn(Collective collective) {
  uint8_t places = 0;
  for (const Algorithm& entry : AllAlgorithms()) places += entry.collective == collective;
  return places;
}

std::string NameAt(Collective collective, uint8_t place) {
  const std::vector<const Algorithm*> table = ForCollective(collective);
  if (place == 0 || place > table.size()) return absl::StrCat("algorithm ", place);
  return std::string(table[place - 1]->name);
}

absl::Status ValidateCall(const hw::CallDescriptor& call, uint32_t world_size) {
  if (!Known(call.collective)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown collective value ", static_cast<int>(call.collective)));
  }
  if (static_cast<uint8_t>(call.datatype) > static_cast<uint8_t>(hw::DataType::kFloat64)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown datatype value ", static_cast<int>(call.datatype)));
  }
  if (static_cast<uint8_t>(call.reduce_op) > static_cast<uint8_t>(hw::ReduceOp::kMin)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown reduce op value ", static_cast<int>(call.reduce_op)));
  }
  if (world_size == 0) return absl::InvalidArgumentError("world size 0; need at least 1 rank");
  if (call.rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", call.rank, " out of range for world size ", world_size));
  }
  if (hw::HasRoot(call.collective) && call.root >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat(Name(call.collective), " root ", call.root,
                                                   " out of range for world size ", world_size));
  }
  if (call.in_place && !hw::HasInPlace(call.collective)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(call.collective), " has no in-place variant"));
  }
  if (call.in_place && hw::HasRoot(call.collective) && call.rank != call.root) {
    return absl::InvalidArgumentError(absl::StrCat(Name(call.collective),
                                                   " in place applies only at the root (rank ",
                                                   call.root, "), not at rank ", call.rank));
  }
  if (call.collective == Collective::kSend || call.collective == Collective::kRecv) {
    const std::string what = Name(call.collective);
    if (call.peer >= world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " peer ", call.peer, " out of range for world size ", world_size));
    }
    if (call.tag == hw::kCollectiveTag) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " tag ", call.tag, " is reserved for collectives; use another tag"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<hw::Program> Generate(const hw::CallDescriptor& call, uint32_t world_size) {
  if (absl::Status valid = ValidateCall(call, world_size); !valid.ok()) return valid;
  const uint64_t bytes = call.count * hw::DataTypeSize(call.datatype);
  const Algorithm* algorithm = call.algorithm.empty()
                                   ? &DefaultFor(call.collective, bytes, world_size)
                                   : Find(call.collective, call.algorithm);
  if (algorithm == nullptr) {
    std::string valid;
    for (const Algorithm* candidate : ForCollective(call.collective)) {
      absl::StrAppend(&valid, valid.empty() ? "" : ", ", std::string(candidate->name));
    }
    // The name may come from a command slot, which holds any bytes.
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ", Name(call.collective), " algorithm '",
                     hw::EscapeControl(call.algorithm), "'; valid: ", valid));
  }
  absl::StatusOr<hw::Program> program = algorithm->generate(call, world_size);
  if (program.ok()) program->algorithm_place = PlaceOf(*algorithm);
  return program;
}

}  // namespace cclo::firmware
