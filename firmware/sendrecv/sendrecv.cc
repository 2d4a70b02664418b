#include "firmware/sendrecv/sendrecv.h"

#include <array>

#include "firmware/sendrecv/sendrecv_direct.h"

namespace cclo::firmware {
namespace {

constexpr std::array kAlgorithms = {
    Algorithm{"direct", hw::Collective::kSend,
              "One message of count elements from op0 to the peer (the rank itself too).", "none",
              &GenerateSendDirect},
    Algorithm{"direct", hw::Collective::kRecv,
              "One message of count elements from the peer (the rank itself too) into result.",
              "none", &GenerateRecvDirect},
};

}  // namespace

absl::Span<const Algorithm> SendRecvAlgorithms() { return kAlgorithms; }

}  // namespace cclo::firmware
