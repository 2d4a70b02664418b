// The one place where absl::Status becomes grpc::Status and back, at the RPC edge, and the
// status every call waiting on a stopping daemon ends with.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace cclo::daemon {

inline grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

/// What a call of this daemon's own clients gets once the daemon stops.
inline absl::Status ShuttingDown() {
  return absl::UnavailableError("this daemon is shutting down");
}

inline absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace cclo::daemon
