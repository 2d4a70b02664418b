#include "cclo/request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/session.h"

namespace cclo {
namespace {

// Longest single Wait RPC; a long op is waited for in slices so no RPC nears its deadline.
constexpr absl::Duration kWaitSlice = absl::Seconds(2);

}  // namespace

absl::Status Request::Poll(absl::Duration slice) {
  v1::WaitRequest request;
  request.set_op_id(op_id_);
  request.set_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(slice)));
  v1::WaitResponse response;
  grpc::ClientContext context;
  session_->Prepare(context, slice + session_->rpc_timeout());
  grpc::Status status = session_->stub().Wait(&context, request, &response);
  if (!status.ok()) return client::FromGrpc(status, "Wait");
  if (response.done()) {
    done_ = true;
    status_ = absl::Status(static_cast<absl::StatusCode>(response.code()), response.message());
    algorithm_ = response.algorithm();
    elapsed_ = absl::Microseconds(response.elapsed_us());
    protocol_ = response.protocol();
    segment_bytes_ = response.segment_bytes();
    chosen_by_ = response.chosen_by();
    policy_version_ = response.policy_version();
  }
  return absl::OkStatus();
}

absl::Status Request::Wait() { return Wait(absl::InfiniteDuration()); }

absl::Status Request::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done_) {
    const absl::Duration left =
        std::max(std::min(deadline, report_by_) - absl::Now(), absl::ZeroDuration());
    if (absl::Status polled = Poll(std::min(left, kWaitSlice)); !polled.ok()) return polled;
    if (done_) break;
    if (absl::Now() >= report_by_) {
      return absl::DeadlineExceededError(
          absl::StrCat("daemon did not report op ", op_id_, " done by its deadline (plus ",
                       absl::FormatDuration(kReportGrace), "); it may be stuck"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("op ", op_id_, " still running after ", absl::FormatDuration(timeout)));
    }
  }
  return status_;
}

absl::StatusOr<bool> Request::Test() {
  if (!done_) {
    if (absl::Status polled = Poll(absl::ZeroDuration()); !polled.ok()) return polled;
  }
  if (!done_) return false;
  if (!status_.ok()) return status_;
  return true;
}

absl::Status Request::Cancel() {
  if (done_) return absl::FailedPreconditionError(absl::StrCat("op ", op_id_, " already finished"));
  v1::CancelRequest request;
  request.set_op_id(op_id_);
  v1::CancelResponse response;
  grpc::ClientContext context;
  session_->Prepare(context, session_->rpc_timeout());
  return client::FromGrpc(session_->stub().Cancel(&context, request, &response), "Cancel");
}

}  // namespace cclo
