#include "firmware/registry.h"

#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "firmware/allreduce/allreduce_ring.h"
#include "firmware/bcast/bcast_one_to_all.h"
#include "firmware/sendrecv/sendrecv_direct.h"

namespace cclo::firmware {
namespace {

using hw::Collective;

absl::StatusOr<hw::Program> GenerateNop(const hw::CallDescriptor& /*call*/,
                                        uint32_t /*world_size*/) {
  hw::Program program;
  program.algorithm = "nop";
  return program;
}

constexpr std::array kAlgorithms = {
    Algorithm{"nop", Collective::kNop, "Does nothing; completes at once.", "none", &GenerateNop},
    Algorithm{"direct", Collective::kSend, "One message of count elements from op0 to the peer.",
              "peer != rank", &GenerateSendDirect},
    Algorithm{"direct", Collective::kRecv,
              "One message of count elements from the peer into result.", "peer != rank",
              &GenerateRecvDirect},
    Algorithm{"one_to_all", Collective::kBcast,
              "The root sends result to every other rank: 1 step, (size-1)*count elements "
              "leave the root.",
              "none", &GenerateBcastOneToAll},
    Algorithm{"ring", Collective::kAllreduce,
              "Reduce-scatter ring then allgather ring over result: 2(size-1) steps, "
              "2(size-1)/size*count elements sent per rank.",
              "none; counts need not divide by the world size", &GenerateAllreduceRing},
};

std::string Name(Collective collective) { return std::string(hw::CollectiveName(collective)); }

bool Known(Collective collective) { return !ForCollective(collective).empty(); }

}  // namespace

absl::Span<const Algorithm> AllAlgorithms() { return kAlgorithms; }

const Algorithm* Find(Collective collective, std::string_view name) {
  for (const Algorithm& algorithm : kAlgorithms) {
    if (algorithm.collective == collective && algorithm.name == name) return &algorithm;
  }
  return nullptr;
}

std::vector<const Algorithm*> ForCollective(Collective collective) {
  std::vector<const Algorithm*> found;
  for (const Algorithm& algorithm : kAlgorithms) {
    if (algorithm.collective == collective) found.push_back(&algorithm);
  }
  return found;
}

const Algorithm& DefaultFor(Collective collective, uint64_t /*bytes*/, uint32_t /*world_size*/) {
  return *ForCollective(collective).front();
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
  if (call.collective == Collective::kBcast && call.root >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("bcast root ", call.root, " out of range for world size ", world_size));
  }
  if (call.collective == Collective::kSend || call.collective == Collective::kRecv) {
    const std::string what = Name(call.collective);
    if (call.peer >= world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " peer ", call.peer, " out of range for world size ", world_size));
    }
    if (call.peer == call.rank) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " peer ", call.peer, " is the calling rank itself"));
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
  if (call.algorithm.empty()) {
    return DefaultFor(call.collective, bytes, world_size).generate(call, world_size);
  }
  const Algorithm* algorithm = Find(call.collective, call.algorithm);
  if (algorithm == nullptr) {
    std::string valid;
    for (const Algorithm* candidate : ForCollective(call.collective)) {
      absl::StrAppend(&valid, valid.empty() ? "" : ", ", std::string(candidate->name));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown ", Name(call.collective), " algorithm '", call.algorithm, "'; valid: ", valid));
  }
  return algorithm->generate(call, world_size);
}

}  // namespace cclo::firmware
