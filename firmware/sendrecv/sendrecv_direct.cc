#include "firmware/sendrecv/sendrecv_direct.h"

#include <utility>

#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;
using hw::Slot;

absl::StatusOr<hw::Program> GenerateSendDirect(const hw::CallDescriptor& call,
                                               uint32_t /*world_size*/) {
  ProgramBuilder program("direct");
  // 1. Stream op0 to the peer.
  program.Copy(Endpoint::Memory(Slot::kOp0, 0), Endpoint::Network(call.peer, call.tag), call.count);
  return std::move(program).Finish();
}

absl::StatusOr<hw::Program> GenerateRecvDirect(const hw::CallDescriptor& call,
                                               uint32_t /*world_size*/) {
  ProgramBuilder program("direct");
  // 1. Land the peer's message in the result buffer.
  program.Copy(Endpoint::Network(call.peer, call.tag), Endpoint::Memory(Slot::kResult, 0),
               call.count);
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
