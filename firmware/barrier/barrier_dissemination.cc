#include "firmware/barrier/barrier_dissemination.h"

#include <utility>
#include <vector>

#include "firmware/patterns/dissemination.h"
#include "firmware/program_builder.h"

namespace cclo::firmware {

using hw::Endpoint;

absl::StatusOr<hw::Program> GenerateBarrierDissemination(const hw::CallDescriptor& call,
                                                         uint32_t world_size) {
  ProgramBuilder program("dissemination");
  // An empty message needs a source but reads nothing.
  const Endpoint no_data = Endpoint::Memory(hw::Slot::kOp0, 0);
  std::vector<uint32_t> previous;
  for (uint32_t round = 0; round < patterns::DisseminationRounds(world_size); ++round) {
    // 1. Once the previous round's message is in, expect this round's and send ours. No
    //    memory is touched, so the order is an explicit dependency.
    const uint32_t from = patterns::DisseminationFrom(call.rank, round, world_size);
    const uint32_t to = patterns::DisseminationTo(call.rank, round, world_size);
    const uint32_t receive =
        program.Copy(Endpoint::Network(from, hw::kCollectiveTag), Endpoint::None(), 0, previous);
    program.Copy(no_data, Endpoint::Network(to, hw::kCollectiveTag), 0, previous);
    previous = {receive};
  }
  return std::move(program).Finish();
}

}  // namespace cclo::firmware
