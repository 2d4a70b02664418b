// The firmware verifier: runs every rank's program of one call in memory, by the execution
// rules of hw/program.h, and checks the programs on the way (dependencies, bounds, peers,
// message matching, memory hazards, deadlock). VerifyCollective drives it for one
// collective algorithm on random data and compares the results with a reference.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "hw/call.h"
#include "hw/program.h"
#include "hw/types.h"

namespace cclo::firmware {

/// One rank of a simulated call: its call fields, its program and its buffers (indexed by
/// hw::Slot; a buffer holds size / DataTypeSize(call.datatype) elements). Execute sizes
/// the scratch slot from the program and fills it with garbage.
struct RankRun {
  hw::CallDescriptor call;
  hw::Program program;
  std::array<std::vector<std::byte>, hw::kSlotCount> buffers;
};

/// Runs runs[r] as rank r of a world of runs.size() ranks, updating the buffers in place.
///
/// First checks every program statically, then simulates: moves start in program order once
/// their deps have completed, the k-th send from s to d with tag t matches the k-th receive
/// at d from s with tag t, a send completes only once its receive has started (rendezvous:
/// nothing is buffered, so a program that passes cannot deadlock on a full rx pool either)
/// and a receive completes when its message is there. Completion is out of order (newest
/// first). INVALID_ARGUMENT, naming rank and move, when:
///  - runs[r].call.rank != r, or a datatype or reduce op value is unknown;
///  - a program asks for more than count x world size scratch elements;
///  - a dep does not point to an earlier move;
///  - a copy has no op0 or has an op1, a reduce lacks an operand, or more than one
///    endpoint of a move is on the network;
///  - a memory access leaves its buffer, or a move's read and write of one slot overlap
///    without being the same range;
///  - a network peer is out of range or the rank itself;
///  - two moves touch overlapping elements of one slot, at least one writing, and neither
///    transitively depends on the other;
///  - a matched send and receive differ in element count or datatype size;
///  - the ranks deadlock (the error names each blocked rank, its blocked moves and what
///    they wait for); a send nobody receives is such a deadlock.
absl::Status Execute(std::vector<RankRun>& runs);

/// One run of VerifyCollective.
struct VerifyCase {
  hw::Collective collective = hw::Collective::kNop;
  std::string_view algorithm;  ///< empty: the registry default
  uint32_t world_size = 1;
  uint64_t count = 0;
  hw::DataType datatype = hw::DataType::kFloat32;
  hw::ReduceOp op = hw::ReduceOp::kSum;
  uint32_t root = 0;      ///< rooted collectives
  bool in_place = false;  ///< every rank (rooted collectives: the root) runs in place
  uint64_t seed = 1;
};

/// Runs one collective on every rank, generating each rank's program through registry
/// Generate, with buffers of exactly contract RequiredElements, random small-integer
/// inputs (so float results are exact) drawn from `seed`, and outputs pre-filled with a
/// value no correct result can take. Compares every buffer of every rank with a reference
/// computed by plain loops (inputs must stay unchanged; what MPI leaves undefined, the
/// rest of an in-place reduce_scatter's buffer, is not compared).
/// send/recv: rank 0 sends to rank world_size-1 (world_size >= 2); the other ranks run a
/// nop. Returns the first error of generation or Execute, or INTERNAL naming rank, slot,
/// index, expected and got value for a wrong result.
absl::Status VerifyCollective(const VerifyCase& run);

}  // namespace cclo::firmware
