#include "client/ccloctl/admin_rpc.h"

#include <sys/un.h>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace cclo::ccloctl {

AdminRpc::AdminRpc(const std::string& runtime_dir, absl::Duration timeout)
    : target_(absl::StrCat("unix:", runtime_dir, "/admin.sock")), timeout_(timeout) {
  // gRPC refuses a longer path only with "Failed to create secure client channel".
  const std::string path = absl::StrCat(runtime_dir, "/admin.sock");
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    target_error_ = absl::InvalidArgumentError(
        absl::StrCat("socket path '", path, "' has ", path.size(), " bytes; at most ",
                     sizeof(sockaddr_un::sun_path) - 1, " fit (give a shorter --runtime-dir)"));
    return;
  }
  stub_ = v1::Admin::NewStub(grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
}

absl::Status AdminRpc::Failure(const grpc::Status& status, const std::string& rpc) const {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach cclod at ", target_, ": ", status.error_message()));
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(absl::StrCat(rpc, " at ", target_, ": no answer within ",
                                                    absl::FormatDuration(timeout_), " (",
                                                    status.error_message(), ")"));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(rpc, " at ", target_, ": ", status.error_message()));
}

}  // namespace cclo::ccloctl
