#include "hw/emu/program_check.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "hw/types.h"

namespace cclo::hw::emu {
namespace {

using Kind = Endpoint::Kind;

const char* SlotName(Slot slot) {
  switch (slot) {
    case Slot::kOp0:
      return "op0";
    case Slot::kOp1:
      return "op1";
    case Slot::kResult:
      return "result";
    case Slot::kScratch:
      return "scratch";
  }
  return "unknown";
}

/// The scratch slot is the program's (sized by scratch_elements); the others are the call's.
absl::Status CheckMemory(const std::string& where, const char* role, const Endpoint& e,
                         uint64_t count, uint64_t element, const CallBuffers& buffers,
                         const Program& program) {
  const size_t slot = static_cast<size_t>(e.slot);
  if (slot >= buffers.views.size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", role, " names buffer slot ", slot));
  }
  const bool scratch = e.slot == Slot::kScratch;
  const BufferView& view = buffers.views[slot];
  const uint64_t bytes = scratch ? program.scratch_elements * element : view.bytes;
  const uint64_t capacity = bytes / element;
  const bool mapped = scratch || view.data != nullptr;
  if (count > capacity || e.offset > capacity - count || (count > 0 && !mapped)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", role, " elements [", e.offset, ", ", e.offset + count, ") of ", element,
        " bytes lie outside the ", SlotName(e.slot), " buffer of ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

/// Memory ranges that a reduce may have on its result: the very same, or disjoint.
bool ExactOrDisjoint(const Endpoint& a, const Endpoint& b, uint64_t count) {
  if (a.kind != Kind::kMemory || b.kind != Kind::kMemory || a.slot != b.slot) return true;
  return a.offset == b.offset || a.offset + count <= b.offset || b.offset + count <= a.offset;
}

absl::Status CheckMove(const Move& move, uint32_t index, const std::string& where,
                       const CallDescriptor& call, const CallBuffers& buffers,
                       const Program& program, uint32_t world_size) {
  auto invalid = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  };
  for (uint32_t dep : move.deps) {
    if (dep >= index) return invalid(absl::StrCat("depends on move ", dep, ", not an earlier one"));
  }
  const Endpoint* endpoints[3] = {&move.op0, &move.op1, &move.result};
  const char* roles[3] = {"op0", "op1", "result"};
  int network = 0;
  for (int i = 0; i < 3; ++i) {
    if (endpoints[i]->kind != Kind::kNetwork) continue;
    ++network;
    if (endpoints[i]->peer >= world_size) {
      return invalid(absl::StrCat(roles[i], " names peer rank ", endpoints[i]->peer, " of a ",
                                  world_size, "-rank communicator"));
    }
  }
  if (network > 1) return invalid(absl::StrCat("has ", network, " network endpoints, at most 1"));
  if (move.function != Function::kCopy && move.function != Function::kReduce) {
    return invalid(absl::StrCat("has unknown function ", static_cast<int>(move.function)));
  }
  const bool reduce = move.function == Function::kReduce;
  if (move.op0.kind == Kind::kNone) return invalid("has no op0");
  if (!reduce && move.op1.kind != Kind::kNone) return invalid("is a copy with an op1");
  if (reduce && move.op1.kind == Kind::kNone) return invalid("is a reduce without op1");
  const bool receives = move.Receives();
  if (move.result.kind == Kind::kNone && (reduce || !receives)) {
    return invalid("writes nowhere");
  }
  const uint64_t element = DataTypeSize(call.datatype);
  for (int i = 0; i < 3; ++i) {
    if (endpoints[i]->kind != Kind::kMemory) continue;
    absl::Status status =
        CheckMemory(where, roles[i], *endpoints[i], move.count, element, buffers, program);
    if (!status.ok()) return status;
  }
  if (reduce && (!ExactOrDisjoint(move.op0, move.result, move.count) ||
                 !ExactOrDisjoint(move.op1, move.result, move.count))) {
    return invalid("reduces an operand that partly overlaps its result");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckProgram(const Program& program, const CallDescriptor& call,
                          const CallBuffers& buffers, uint32_t world_size) {
  const uint64_t scratch_limit =
      call.count > UINT64_MAX / world_size ? UINT64_MAX : call.count * world_size;
  if (program.scratch_elements > scratch_limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "program '", program.algorithm, "' asks for ", program.scratch_elements,
        " scratch elements; at most count x world size = ", scratch_limit));
  }
  for (uint32_t i = 0; i < program.moves.size(); ++i) {
    const std::string where = absl::StrCat("move ", i, " of program '", program.algorithm, "' for ",
                                           std::string(CollectiveName(call.collective)));
    absl::Status status =
        CheckMove(program.moves[i], i, where, call, buffers, program, world_size);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace cclo::hw::emu
