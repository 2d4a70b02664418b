// The Admin RPCs ccloctl calls on a daemon's admin.sock.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cclo/v1/admin.grpc.pb.h"

namespace cclo::ccloctl {

/// A connection to the Admin service in a daemon's runtime directory.
class AdminRpc {
 public:
  /// Targets unix:<runtime_dir>/admin.sock; each RPC has `timeout` as its deadline.
  AdminRpc(const std::string& runtime_dir, absl::Duration timeout);

  /// Daemon identity, uptime and counters. An unreachable daemon is UNAVAILABLE naming the
  /// socket.
  absl::StatusOr<v1::StatusResponse> Status();
  /// Communicators the daemon takes part in.
  absl::StatusOr<v1::ListCommunicatorsResponse> ListCommunicators();
  /// One communicator by hex id or unique prefix; NOT_FOUND or INVALID_ARGUMENT (with the
  /// daemon's reason) when the id names none or several.
  absl::StatusOr<v1::ShowCommunicatorResponse> ShowCommunicator(const std::string& comm_id);

 private:
  // Converts an RPC failure, saying which daemon could not be reached.
  absl::Status Failure(const grpc::Status& status, const std::string& rpc) const;

  std::string target_;
  absl::Duration timeout_;
  std::unique_ptr<v1::Admin::Stub> stub_;
};

}  // namespace cclo::ccloctl
