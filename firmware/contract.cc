#include "firmware/contract.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace cclo::firmware {
namespace {

uint64_t Times(uint64_t count, uint32_t world_size) {
  return world_size != 0 && count > UINT64_MAX / world_size ? UINT64_MAX : count * world_size;
}

struct Sizes {
  uint64_t op0 = 0;
  uint64_t result = 0;
};

Sizes For(const hw::CallDescriptor& call, uint32_t world_size) {
  const uint64_t n = call.count;
  const uint64_t all = Times(n, world_size);
  const bool root = call.rank == call.root;
  const bool in_place = call.in_place;
  switch (call.collective) {
    case hw::Collective::kSend:
      return {n, 0};
    case hw::Collective::kRecv:
    case hw::Collective::kBcast:
      return {0, n};
    case hw::Collective::kScatter:
      if (root && in_place) return {0, all};
      return {root ? all : 0, n};
    case hw::Collective::kGather:
      return {root && in_place ? 0 : n, root ? all : 0};
    case hw::Collective::kAllgather:
      return {in_place ? 0 : n, all};
    case hw::Collective::kReduce:
      return {root && in_place ? 0 : n, root ? n : 0};
    case hw::Collective::kAllreduce:
      return {in_place ? 0 : n, n};
    case hw::Collective::kReduceScatter:
      return in_place ? Sizes{0, all} : Sizes{all, n};
    case hw::Collective::kAlltoall:
      return {in_place ? 0 : all, all};
    case hw::Collective::kBarrier:
    case hw::Collective::kNop:
      return {};
  }
  return {};
}

}  // namespace

uint64_t RequiredElements(const hw::CallDescriptor& call, uint32_t world_size, hw::Slot slot) {
  const Sizes sizes = For(call, world_size);
  if (slot == hw::Slot::kOp0) return sizes.op0;
  if (slot == hw::Slot::kResult) return sizes.result;
  return 0;
}

absl::StatusOr<uint64_t> RequiredBytes(const hw::CallDescriptor& call, uint32_t world_size,
                                       hw::Slot slot) {
  hw::CallDescriptor unit = call;  // a buffer holds no, one or world_size chunks of count
  unit.count = 1;
  const uint64_t chunks = RequiredElements(unit, world_size, slot);
  if (chunks == 0) return 0;
  const uint64_t element = hw::DataTypeSize(call.datatype);
  if (call.count > UINT64_MAX / element / chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "count ", call.count, " of ", std::string(hw::DataTypeName(call.datatype)),
        chunks > 1 ? absl::StrCat(" times ", chunks, " ranks") : "", " overflows a byte length"));
  }
  return call.count * chunks * element;
}

}  // namespace cclo::firmware
