#include "client/rpc_path.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/session.h"
#include "hw/clock.h"

namespace cclo::client {
namespace {

// Longest single Wait RPC: a long op is waited for in slices so that no RPC nears its
// deadline (what libcclo's Request::Wait did before the rings).
constexpr absl::Duration kWaitSlice = absl::Seconds(2);

}  // namespace

absl::Status RpcPath::Nop(Communicator& comm, absl::Duration timeout) {
  if (absl::Status live = comm.CheckNotDestroyed(); !live.ok()) return live;
  absl::StatusOr<uint32_t> timeout_ms = TimeoutMillis(timeout, "op");
  if (!timeout_ms.ok()) return timeout_ms.status();
  Session& session = *comm.session_;
  v1::SubmitRequest request;
  request.set_comm_handle(comm.handle_);
  request.set_collective(v1::NOP);
  request.set_timeout_ms(*timeout_ms);
  v1::SubmitResponse submitted;
  const hw::SteadyTime submitted_at = hw::SteadyNow();
  {
    grpc::ClientContext context;
    session.Prepare(context, session.rpc_timeout());
    grpc::Status status = session.stub().Submit(&context, request, &submitted);
    if (!status.ok()) return session.FromGrpc(status, "Submit");
  }
  // The daemon ends every op by its deadline; past that plus a grace, stop asking.
  const hw::SteadyTime report_by =
      submitted_at + absl::Milliseconds(submitted.timeout_ms()) + Request::kReportGrace;
  v1::WaitRequest wait;
  wait.set_op_id(submitted.op_id());
  wait.set_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(kWaitSlice)));
  while (hw::SteadyNow() < report_by) {
    v1::WaitResponse result;
    grpc::ClientContext context;
    session.Prepare(context, kWaitSlice + session.rpc_timeout());
    grpc::Status status = session.stub().Wait(&context, wait, &result);
    if (!status.ok()) return session.FromGrpc(status, "Wait");
    if (result.done()) {
      return absl::Status(static_cast<absl::StatusCode>(result.code()), result.message());
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat("daemon did not report op ", submitted.op_id(), " done by its deadline (plus ",
                   absl::FormatDuration(Request::kReportGrace), "); it may be stuck"));
}

}  // namespace cclo::client
