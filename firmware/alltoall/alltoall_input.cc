#include "firmware/alltoall/alltoall_input.h"

namespace cclo::firmware {

hw::Endpoint AlltoallChunk(hw::Slot slot, uint32_t index, uint64_t count) {
  return hw::Endpoint::Memory(slot, uint64_t{index} * count);
}

hw::Slot PlaceAlltoallInput(ProgramBuilder& program, const hw::CallDescriptor& call,
                            uint32_t world_size) {
  const uint64_t count = call.count;
  if (!call.in_place) {
    program.Copy(AlltoallChunk(hw::Slot::kOp0, call.rank, count),
                 AlltoallChunk(hw::Slot::kResult, call.rank, count), count);
    return hw::Slot::kOp0;
  }
  if (world_size == 1) return hw::Slot::kOp0;
  program.SetScratch(uint64_t{world_size} * count);
  program.Copy(AlltoallChunk(hw::Slot::kResult, 0, count),
               AlltoallChunk(hw::Slot::kScratch, 0, count), uint64_t{world_size} * count);
  return hw::Slot::kScratch;
}

}  // namespace cclo::firmware
