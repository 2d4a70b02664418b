#include "firmware/contract.h"

namespace cclo::firmware {

uint64_t RequiredElements(hw::Collective collective, hw::Slot slot, uint64_t count,
                          uint32_t /*world_size*/) {
  switch (collective) {
    case hw::Collective::kSend:
      return slot == hw::Slot::kOp0 ? count : 0;
    case hw::Collective::kRecv:
    case hw::Collective::kBcast:
      return slot == hw::Slot::kResult ? count : 0;
    case hw::Collective::kAllreduce:
      return slot == hw::Slot::kOp0 || slot == hw::Slot::kResult ? count : 0;
    case hw::Collective::kNop:
      return 0;
  }
  return 0;
}

}  // namespace cclo::firmware
