#include <grpcpp/security/auth_context.h>

#include "absl/strings/str_cat.h"
#include "daemon/services.h"
#include "daemon/status.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

/// ", certificate CN=<name>" for a caller that presented a TLS certificate, else "".
std::string CertificateName(const grpc::ServerContext& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth) return "";
  std::vector<grpc::string_ref> names = auth->FindPropertyValues("x509_common_name");
  if (names.empty()) return "";
  return absl::StrCat(", certificate CN=",
                      hw::EscapeControl(std::string_view(names[0].data(), names[0].size())));
}

}  // namespace

grpc::Status PeerService::Join(grpc::ServerContext* context,
                               const cclo::v1::PeerJoinRequest* request,
                               cclo::v1::PeerJoinResponse* response) {
  if (request->version() != 1) {
    return ToGrpc(absl::FailedPreconditionError(
        absl::StrCat("peer protocol version ", request->version(), " unsupported; expected 1")));
  }
  absl::StatusOr<cclo::v1::PeerJoinResponse> joined =
      root_gather_->Join(*request, hw::FromWallDeadline(context->deadline()),
                         [context] { return context->IsCancelled(); });
  if (!joined.ok()) {
    // The caller's word for its address, perhaps unproven (the proof may be what failed).
    spdlog::warn("join of rank {} from peer daemon {} ({}{}) refused: {}", request->rank(),
                 hw::EscapeControl(request->daemon_address()), context->peer(),
                 CertificateName(*context), std::string(joined.status().message()));
    return ToGrpc(joined.status());
  }
  *response = *std::move(joined);
  return grpc::Status::OK;
}

}  // namespace cclo::daemon
