// The Admin RPCs ccloctl calls on a daemon's admin.sock.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cclo/v1/admin.grpc.pb.h"

namespace cclo::ccloctl {

/// A connection to the Admin service in a daemon's runtime directory.
class AdminRpc {
 public:
  /// Targets unix:<runtime_dir>/admin.sock; each RPC has `timeout` as its deadline. A
  /// path too long for a Unix socket fails every call with INVALID_ARGUMENT saying so.
  AdminRpc(const std::string& runtime_dir, absl::Duration timeout);

  /// Calls `rpc` (e.g. &v1::Admin::Stub::Status, named `name` in errors). An unreachable
  /// daemon is UNAVAILABLE naming the socket, one that does not answer in time
  /// DEADLINE_EXCEEDED saying how long it waited; other failures keep the daemon's code and
  /// reason (e.g. ShowCommunicator: NOT_FOUND or INVALID_ARGUMENT for an id naming none or
  /// several).
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (v1::Admin::Stub::*rpc)(grpc::ClientContext*,
                                                                     const Request&, Response*),
                                const char* name, const Request& request = Request()) {
    if (!target_error_.ok()) return target_error_;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
    Response response;
    grpc::Status status = (stub_.get()->*rpc)(&context, request, &response);
    if (!status.ok()) return Failure(status, name);
    return response;
  }

 private:
  // Converts an RPC failure, saying which daemon could not be reached.
  absl::Status Failure(const grpc::Status& status, const std::string& rpc) const;

  std::string target_;
  absl::Status target_error_;  ///< why target_ cannot be a socket path, or OK
  absl::Duration timeout_;
  std::unique_ptr<v1::Admin::Stub> stub_;
};

}  // namespace cclo::ccloctl
