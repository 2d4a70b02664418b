#include "firmware/reduce/reduce_ring.h"

#include <algorithm>
#include <utility>

#include "firmware/patterns/ring.h"
#include "firmware/program_builder.h"
#include "hw/types.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;
using patterns::Chunk;

namespace {

constexpr uint64_t kPieceBytes = 64 * 1024;
constexpr uint64_t kMaxPieces = 256;

}  // namespace

uint32_t ReduceRingPieces(uint64_t count, uint64_t element_size) {
  const uint64_t per_piece = std::max<uint64_t>(1, kPieceBytes / element_size);
  const uint64_t pieces = count / per_piece + (count % per_piece != 0 ? 1 : 0);
  return static_cast<uint32_t>(std::min({std::max<uint64_t>(pieces, 1), kMaxPieces, count}));
}

absl::StatusOr<hw::Program> GenerateReduceRing(const hw::CallDescriptor& call,
                                               uint32_t world_size) {
  ProgramBuilder program("ring");
  const uint64_t count = call.count;
  if (count == 0) return std::move(program).Finish();
  const Slot input = call.in_place ? Slot::kResult : Slot::kOp0;
  // 1. Alone, the root's input is the result.
  if (world_size == 1) {
    if (!call.in_place) {
      program.Copy(Endpoint::Memory(input, 0), Endpoint::Memory(Slot::kResult, 0), count);
    }
    return std::move(program).Finish();
  }
  const bool first = call.rank == patterns::RingRight(call.root, world_size);
  const bool last = call.rank == call.root;
  const Endpoint from_left =
      Endpoint::Network(patterns::RingLeft(call.rank, world_size), hw::kCollectiveTag);
  const Endpoint to_right =
      Endpoint::Network(patterns::RingRight(call.rank, world_size), hw::kCollectiveTag);
  if (!first && !last) program.SetScratch(count);
  const uint32_t pieces = ReduceRingPieces(count, hw::DataTypeSize(call.datatype));
  for (uint32_t index = 0; index < pieces; ++index) {
    const Chunk piece = patterns::RingChunk(count, pieces, index);
    const Endpoint mine = Endpoint::Memory(input, piece.offset);
    // 2. The rank after the root starts the chain with its input.
    if (first) {
      program.Copy(mine, to_right, piece.count);
      continue;
    }
    // 3. The root adds its input to the arriving piece, into the result.
    if (last) {
      program.Reduce(from_left, mine, Endpoint::Memory(Slot::kResult, piece.offset), piece.count);
      continue;
    }
    // 4. Every rank between adds its input, into scratch, and passes the piece on.
    const Endpoint partial = Endpoint::Memory(Slot::kScratch, piece.offset);
    program.Reduce(from_left, mine, partial, piece.count);
    program.Copy(partial, to_right, piece.count);
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
