#include "firmware/barrier/barrier.h"

#include <array>

#include "firmware/barrier/barrier_dissemination.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"dissemination", hw::Collective::kBarrier,
              "In round k rank r signals r+2^k and waits for r-2^k: ceil(log2 size) rounds of "
              "one empty message each way.",
              "none", &GenerateBarrierDissemination},
};

}  // namespace

absl::Span<const Algorithm> BarrierAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
