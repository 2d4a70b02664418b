#include "client/ccloctl/admin_rpc.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace cclo::ccloctl {

AdminRpc::AdminRpc(const std::string& runtime_dir, absl::Duration timeout)
    : target_(absl::StrCat("unix:", runtime_dir, "/admin.sock")),
      timeout_(timeout),
      stub_(v1::Admin::NewStub(grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()))) {}

absl::Status AdminRpc::Failure(const grpc::Status& status, const std::string& rpc) const {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach cclod at ", target_, ": ", status.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(rpc, " at ", target_, ": ", status.error_message()));
}

absl::StatusOr<v1::StatusResponse> AdminRpc::Status() {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  v1::StatusResponse response;
  grpc::Status status = stub_->Status(&context, v1::StatusRequest(), &response);
  if (!status.ok()) return Failure(status, "Status");
  return response;
}

absl::StatusOr<v1::ListCommunicatorsResponse> AdminRpc::ListCommunicators() {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  v1::ListCommunicatorsResponse response;
  grpc::Status status =
      stub_->ListCommunicators(&context, v1::ListCommunicatorsRequest(), &response);
  if (!status.ok()) return Failure(status, "ListCommunicators");
  return response;
}

absl::StatusOr<v1::ShowCommunicatorResponse> AdminRpc::ShowCommunicator(
    const std::string& comm_id) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  v1::ShowCommunicatorRequest request;
  request.set_comm_id(comm_id);
  v1::ShowCommunicatorResponse response;
  grpc::Status status = stub_->ShowCommunicator(&context, request, &response);
  if (!status.ok()) return Failure(status, "ShowCommunicator");
  return response;
}

}  // namespace cclo::ccloctl
