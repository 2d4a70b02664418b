// A call to the CCLO, modelled on ACCL's call fields.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "hw/program.h"
#include "hw/types.h"

namespace cclo::hw {

/// The fields of one engine call. Pure data: the firmware derives a Program from it.
struct CallDescriptor {
  Collective collective = Collective::kNop;
  CommId comm{};          ///< communicator the call runs on
  uint32_t rank = 0;      ///< the calling rank in that communicator
  uint32_t root = 0;      ///< bcast, scatter: the source; gather, reduce: the destination
  uint32_t peer = 0;      ///< send: destination rank; recv: source rank
  uint32_t tag = 0;       ///< send/recv: message tag (not kCollectiveTag)
  DataType datatype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  uint64_t count = 0;     ///< elements per rank contribution (see firmware/contract.h)
  /// MPI_IN_PLACE: the input is read from the result buffer where the output of this
  /// rank would go (firmware/contract.h says where), and op0 is not used. Only for
  /// collectives where hw::HasInPlace holds; for rooted ones it applies at the root only.
  bool in_place = false;
  std::string algorithm;  ///< forced algorithm name; empty means the default selection
  Protocol protocol = Protocol::kEager;  ///< how messages to other engines go
  /// Largest data segment of a rendezvous message; 0 means the data session's.
  uint64_t segment_bytes = 0;
  uint32_t tenant = 0;    ///< tenant index: whose share of the engine the call uses (DESIGN 9)
};

/// The call's CallSignature with the algorithm at `algorithm_place` (Program): what the
/// other ranks' calls must match.
inline CallSignature SignatureOf(const CallDescriptor& call, uint8_t algorithm_place) {
  return Canonical({.collective = call.collective,
                    .datatype = call.datatype,
                    .reduce_op = call.reduce_op,
                    .algorithm = algorithm_place,
                    .root = call.root});
}

/// A mapped byte range of one call buffer.
struct BufferView {
  std::byte* data = nullptr;
  uint64_t bytes = 0;
};

/// The call's buffers (indexed by Slot; the engine sets Slot::kScratch itself) and
/// whatever keeps their mappings alive until the call completes.
struct CallBuffers {
  std::array<BufferView, kSlotCount> views{};
  std::shared_ptr<const void> keepalive;
};

}  // namespace cclo::hw
