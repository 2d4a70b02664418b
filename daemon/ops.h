// Turns a client's Submit into an engine call: checks every field, the communicator
// handle and each buffer reference (ownership, bounds, count overflow), then runs it.
#pragma once

#include "absl/status/statusor.h"
#include "cclo/v1/client.pb.h"
#include "daemon/communicators.h"
#include "daemon/sessions.h"
#include "hw/device.h"

namespace cclo::daemon {

class Ops {
 public:
  Ops(hw::Device* device, Communicators* communicators, absl::Duration default_deadline)
      : device_(device), communicators_(communicators), default_deadline_(default_deadline) {}

  /// Validates and starts the op; its result arrives through Session::WaitOp.
  absl::StatusOr<cclo::v1::SubmitResponse> Submit(const SessionPtr& session,
                                                  const cclo::v1::SubmitRequest& request);

 private:
  hw::Device* const device_;
  Communicators* const communicators_;
  const absl::Duration default_deadline_;
};

}  // namespace cclo::daemon
