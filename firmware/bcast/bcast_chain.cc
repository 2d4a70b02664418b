#include "firmware/bcast/bcast_chain.h"

#include <algorithm>
#include <utility>

#include "firmware/patterns/ring.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;

namespace {

constexpr uint64_t kPieceBytes = uint64_t{64} << 10;
constexpr uint64_t kMaxPieces = 64;

}  // namespace

uint32_t BcastChainPieces(uint64_t count, size_t element_size) {
  const uint64_t bytes = count > UINT64_MAX / element_size ? UINT64_MAX : count * element_size;
  const uint64_t started = bytes / kPieceBytes + (bytes % kPieceBytes != 0 ? 1 : 0);
  const uint64_t pieces = std::clamp<uint64_t>(started, 1, kMaxPieces);
  return static_cast<uint32_t>(std::min(pieces, count));
}

absl::StatusOr<hw::Program> GenerateBcastChain(const hw::CallDescriptor& call,
                                               uint32_t world_size) {
  ProgramBuilder program("chain");
  const uint32_t left = patterns::RingLeft(call.rank, world_size);
  const uint32_t right = patterns::RingRight(call.rank, world_size);
  const bool receives = call.rank != call.root;
  const bool sends = right != call.root;
  const uint32_t pieces = BcastChainPieces(call.count, hw::DataTypeSize(call.datatype));
  for (uint32_t index = 0; index < pieces; ++index) {
    const patterns::Chunk piece = patterns::RingChunk(call.count, pieces, index);
    const Endpoint buffer = Endpoint::Memory(hw::Slot::kResult, piece.offset);
    // 1. Receive piece k from the left. It starts once piece k-1 has arrived, as the
    //    forward of k-1 before it waits for that.
    if (receives) {
      program.Copy(Endpoint::Network(left, hw::kCollectiveTag), buffer, piece.count);
    }
    // 2. Forward piece k to the right once it is here (a hazard the builder orders).
    if (sends) program.Copy(buffer, Endpoint::Network(right, hw::kCollectiveTag), piece.count);
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
