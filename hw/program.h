// The CCLO instruction set: a Program is a list of moves, as executed by the data-movement
// processor (DMP) of ACCL+. Firmware emits Programs; hw/emu executes them; the verifier
// simulates them. A move has two operand slots and one result slot:
//
//   op0, op1 : nothing, memory (one of the call's three buffers, or the program's scratch,
//              at an element offset), or the network (arrival from a peer rank with a tag)
//   result   : nothing, memory, or the network (to a peer rank with a tag)
//   function : copy (op0 only) or reduce (op0 (+) op1, with the call's reduce op)
//
// Execution rules (the contract firmware relies on):
//  - Moves are started in program order; a move starts once every move in `deps` has
//    completed. Completion may be out of order, so deps must cover every memory hazard.
//  - A move with a network result completes when all its data has left the call's memory.
//    It may not complete before the matching receive has started (rendezvous): firmware
//    must be deadlock-free even when no send is buffered.
//  - A move with a network operand completes when all its data has arrived and been
//    written to the result.
//  - The k-th network send from rank s to rank d with tag t (in program order, across the
//    calls of one communicator) matches the k-th network receive at d from s with tag t.
//  - At most one operand or the result is on the network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cclo::hw {

/// The call's three buffers, as in an ACCL call: two operands and a result; and the
/// program's own scratch memory, which the engine provides for the call's duration.
enum class Slot : uint8_t {
  kOp0 = 0,
  kOp1 = 1,
  kResult = 2,
  kScratch = 3,
};
inline constexpr int kSlotCount = 4;

/// Where a move reads or writes.
struct Endpoint {
  enum class Kind : uint8_t { kNone, kMemory, kNetwork };
  Kind kind = Kind::kNone;
  Slot slot = Slot::kOp0;  ///< kMemory: which of the call's buffers
  uint64_t offset = 0;     ///< kMemory: offset in elements of the call's datatype
  uint32_t peer = 0;       ///< kNetwork: peer rank in the communicator
  uint32_t tag = 0;        ///< kNetwork: message tag

  static Endpoint None() { return {}; }
  static Endpoint Memory(Slot slot, uint64_t offset) {
    return {Kind::kMemory, slot, offset, 0, 0};
  }
  static Endpoint Network(uint32_t peer, uint32_t tag) {
    return {Kind::kNetwork, Slot::kOp0, 0, peer, tag};
  }
  bool operator==(const Endpoint&) const = default;
};

enum class Function : uint8_t {
  kCopy,    ///< result = op0
  kReduce,  ///< result = op0 (+) op1, elementwise with the call's reduce op
};

/// One DMP instruction.
struct Move {
  Endpoint op0;
  Endpoint op1;
  Endpoint result;
  Function function = Function::kCopy;
  uint64_t count = 0;           ///< elements of the call's datatype
  std::vector<uint32_t> deps;   ///< indices of earlier moves that must complete first

  /// An operand comes from the network (the move is a receive).
  bool Receives() const {
    return op0.kind == Endpoint::Kind::kNetwork || op1.kind == Endpoint::Kind::kNetwork;
  }
  /// The operand that comes from the network, of a move that Receives().
  const Endpoint& NetworkOperand() const {
    return op0.kind == Endpoint::Kind::kNetwork ? op0 : op1;
  }
};

/// What firmware emits for one rank of one call.
struct Program {
  std::string algorithm;  ///< registry name of the algorithm that produced it
  /// Its place in its collective's table (firmware/registry.h), from 1: the call's
  /// messages carry it (CallSignature).
  uint8_t algorithm_place = 0;
  std::vector<Move> moves;
  /// Elements of the call's datatype in Slot::kScratch (uninitialised at the start); at
  /// most the call's count times the world size.
  uint64_t scratch_elements = 0;
};

/// Tag reserved for the messages of collectives; point-to-point tags must differ.
inline constexpr uint32_t kCollectiveTag = 0xFFFFFFFFu;

}  // namespace cclo::hw
