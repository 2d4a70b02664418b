#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/services.h"
#include "daemon/status.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

/// Longest single Wait RPC; clients loop for longer waits.
constexpr uint32_t kMaxWaitMs = 30'000;

/// For a call that may wait (`waits`), a lease on its tenant's waiting_calls quota, held
/// until the call returns: each such call holds a thread of the daemon meanwhile.
absl::StatusOr<Lease> WaitingCall(const Session& session, bool waits) {
  if (!waits) return Lease();
  return session.tenant()->Acquire(Resource::kWaitingCalls, 1);
}

}  // namespace

absl::StatusOr<SessionPtr> ClientService::Authenticate(const grpc::ServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto found = metadata.find("cclo-session");
  if (found == metadata.end()) {
    return absl::UnauthenticatedError("missing 'cclo-session' metadata; attach first");
  }
  return sessions_->FindByToken(std::string(found->second.data(), found->second.size()));
}

grpc::Status ClientService::AllocBuffer(grpc::ServerContext* context,
                                        const cclo::v1::AllocBufferRequest* request,
                                        cclo::v1::AllocBufferResponse* response) {
  absl::StatusOr<SessionPtr> session = Authenticate(*context);
  if (!session.ok()) return ToGrpc(session.status());
  if (absl::Status admitted = drain_->Admit("new buffers"); !admitted.ok()) {
    return ToGrpc(admitted);
  }
  if (request->bytes() == 0 || request->bytes() > config_->max_buffer_bytes) {
    return ToGrpc(absl::InvalidArgumentError(absl::StrCat(
        "buffer size ", request->bytes(), " is not in [1, ", config_->max_buffer_bytes, "]")));
  }
  absl::StatusOr<Lease> count = (*session)->tenant()->Acquire(Resource::kBuffers, 1);
  if (!count.ok()) return ToGrpc(count.status());
  absl::StatusOr<Lease> bytes =
      (*session)->tenant()->Acquire(Resource::kBufferBytes, request->bytes());
  if (!bytes.ok()) return ToGrpc(bytes.status());
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = next_buffer_id_++;
  }
  absl::StatusOr<SharedBufferPtr> buffer = SharedBuffer::Create(id, request->bytes());
  if (!buffer.ok()) return ToGrpc(buffer.status());
  if (absl::Status added = (*session)->AddBuffer(*buffer, *std::move(bytes), *std::move(count));
      !added.ok())
    return ToGrpc(added);
  response->set_buffer_id(id);
  response->set_bytes(request->bytes());
  return grpc::Status::OK;
}

grpc::Status ClientService::FreeBuffer(grpc::ServerContext* context,
                                       const cclo::v1::FreeBufferRequest* request,
                                       cclo::v1::FreeBufferResponse*) {
  absl::StatusOr<SessionPtr> session = Authenticate(*context);
  if (!session.ok()) return ToGrpc(session.status());
  return ToGrpc((*session)->RemoveBuffer(request->buffer_id()));
}

grpc::Status ClientService::CreateCommunicatorId(
    grpc::ServerContext* context, const cclo::v1::CreateCommunicatorIdRequest* request,
    cclo::v1::CreateCommunicatorIdResponse* response) {
  absl::StatusOr<SessionPtr> session = Authenticate(*context);
  if (!session.ok()) return ToGrpc(session.status());
  if (absl::Status admitted = drain_->Admit("new communicators"); !admitted.ok()) {
    return ToGrpc(admitted);
  }
  absl::StatusOr<std::string> token = communicators_->CreateId(*session, request->label());
  if (!token.ok()) return ToGrpc(token.status());
  response->set_token(*std::move(token));
  return grpc::Status::OK;
}

grpc::Status ClientService::JoinCommunicator(grpc::ServerContext* context,
                                             const cclo::v1::JoinCommunicatorRequest* request,
                                             cclo::v1::JoinCommunicatorResponse* response) {
  absl::StatusOr<SessionPtr> session = Authenticate(*context);
  if (!session.ok()) return ToGrpc(session.status());
  if (absl::Status admitted = drain_->Admit("joins"); !admitted.ok()) return ToGrpc(admitted);
  absl::StatusOr<Lease> waiting = WaitingCall(**session, true);
  if (!waiting.ok()) return ToGrpc(waiting.status());
  // At most this daemon's join_timeout_ms, whatever the client asks: a join holds a thread,
  // the tenant's quotas and the communicator's record here while its root does not answer.
  const absl::Duration timeout =
      request->timeout_ms() > 0
          ? std::min(absl::Milliseconds(request->timeout_ms()), config_->join_timeout)
          : config_->join_timeout;
  // Not past the caller's own deadline: a join it gave up on must not go on without it.
  const hw::SteadyTime deadline =
      std::min(hw::SteadyNow() + timeout, hw::FromWallDeadline(context->deadline()));
  absl::StatusOr<Communicators::Joined> joined =
      communicators_->Join(*session, request->token(), request->rank(), request->size(), deadline);
  if (!joined.ok()) {
    spdlog::warn("session {}: join as rank {} of {} failed: {}", (*session)->id(), request->rank(),
                 request->size(), std::string(joined.status().message()));
    return ToGrpc(joined.status());
  }
  response->set_comm_handle(joined->handle);
  response->set_comm_id(hw::CommIdHex(joined->comm));
  for (const cclo::v1::RankInfo& rank : joined->ranks) *response->add_ranks() = rank;
  return grpc::Status::OK;
}

grpc::Status ClientService::DestroyCommunicator(grpc::ServerContext* context,
                                                const cclo::v1::DestroyCommunicatorRequest* request,
                                                cclo::v1::DestroyCommunicatorResponse*) {
  absl::StatusOr<SessionPtr> session = Authenticate(*context);
  if (!session.ok()) return ToGrpc(session.status());
  return ToGrpc(communicators_->Destroy(*session, request->comm_handle()));
}

grpc::Status ClientService::Submit(grpc::ServerContext* context,
                                   const cclo::v1::SubmitRequest* request,
                                   cclo::v1::SubmitResponse* response) {
  absl::StatusOr<SessionPtr> session = Authenticate(*context);
  if (!session.ok()) return ToGrpc(session.status());
  absl::StatusOr<Lease> waiting = WaitingCall(**session, request->wait_for_room());
  if (!waiting.ok()) return ToGrpc(waiting.status());
  absl::StatusOr<Accepted> submitted =
      ops_->Submit(*session, FromSubmitRequest(*request), nullptr, [context]() -> absl::Status {
        if (!context->IsCancelled()) return absl::OkStatus();
        return absl::CancelledError(
            "the Submit call ended (cancelled, or past its deadline) while it waited for room");
      });
  if (!submitted.ok()) {
    ops_->CountRefused(submitted.status());
    if (auto retry_ms = submitted.status().GetPayload(kRetryAfterMs)) {
      context->AddTrailingMetadata(kRetryAfterMs, std::string(*retry_ms));
    }
    return ToGrpc(submitted.status());
  }
  response->set_op_id(submitted->op_id);
  response->set_timeout_ms(submitted->timeout_ms);
  return grpc::Status::OK;
}

grpc::Status ClientService::Wait(grpc::ServerContext* context, const cclo::v1::WaitRequest* request,
                                 cclo::v1::WaitResponse* response) {
  absl::StatusOr<SessionPtr> session = Authenticate(*context);
  if (!session.ok()) return ToGrpc(session.status());
  absl::StatusOr<Lease> waiting = WaitingCall(**session, request->timeout_ms() > 0);
  if (!waiting.ok()) return ToGrpc(waiting.status());
  // Not past the caller's own deadline, and answered with time to reach it (nine tenths of
  // what is left, as a join asks of its root): a result collected for a caller that gave up
  // would be lost, as its next Wait finds no such op.
  const absl::Duration timeout =
      std::min(absl::Milliseconds(std::min(request->timeout_ms(), kMaxWaitMs)),
               hw::Left(hw::FromWallDeadline(context->deadline())) * 9 / 10);
  absl::StatusOr<std::optional<OpResult>> result =
      (*session)->WaitOp(request->op_id(), timeout, [context] { return context->IsCancelled(); });
  if (!result.ok()) return ToGrpc(result.status());
  if (!result->has_value()) {
    response->set_done(false);
    return grpc::Status::OK;
  }
  *response = ToWaitResponse(**result);
  return grpc::Status::OK;
}

grpc::Status ClientService::Cancel(grpc::ServerContext* context,
                                   const cclo::v1::CancelRequest* request,
                                   cclo::v1::CancelResponse*) {
  absl::StatusOr<SessionPtr> session = Authenticate(*context);
  if (!session.ok()) return ToGrpc(session.status());
  return ToGrpc((*session)->CancelOp(request->op_id()));
}

}  // namespace cclo::daemon
