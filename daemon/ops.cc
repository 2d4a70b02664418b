#include "daemon/ops.h"

#include "absl/strings/str_cat.h"
#include "firmware/contract.h"
#include "firmware/registry.h"

namespace cclo::daemon {
namespace {

constexpr int kMaxDataType = static_cast<int>(hw::DataType::kFloat64);
constexpr int kMaxReduceOp = static_cast<int>(hw::ReduceOp::kMin);
constexpr int kMaxCollective = static_cast<int>(hw::kLastCollective);

/// Resolves one buffer reference for `slot` if the collective uses that slot.
absl::Status ResolveBuffer(const Session& session, const char* name,
                           const cclo::v1::BufferRef& ref, uint64_t required_bytes,
                           hw::BufferView& view, std::vector<SharedBufferPtr>& keep) {
  if (required_bytes == 0) return absl::OkStatus();
  absl::StatusOr<SharedBufferPtr> buffer = session.FindBuffer(ref.buffer_id());
  if (!buffer.ok()) {
    return absl::NotFoundError(absl::StrCat(name, " buffer: ", buffer.status().message()));
  }
  const uint64_t size = (*buffer)->bytes();
  if (ref.offset() > size || ref.length() > size - ref.offset()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " range [", ref.offset(), ", +", ref.length(),
                     ") is outside buffer ", ref.buffer_id(), " of ", size, " bytes"));
  }
  if (ref.length() < required_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, " range of ", ref.length(),
                                                   " bytes is smaller than the ",
                                                   required_bytes, " bytes the op needs"));
  }
  view = {(*buffer)->data() + ref.offset(), ref.length()};
  keep.push_back(*std::move(buffer));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<cclo::v1::SubmitResponse> Ops::Submit(const SessionPtr& session,
                                                     const cclo::v1::SubmitRequest& request) {
  if (request.collective() < 0 || request.collective() > kMaxCollective) {
    return absl::InvalidArgumentError(absl::StrCat("unknown collective ", request.collective()));
  }
  if (request.datatype() < 0 || request.datatype() > kMaxDataType) {
    return absl::InvalidArgumentError(absl::StrCat("unknown datatype ", request.datatype()));
  }
  if (request.reduce_op() < 0 || request.reduce_op() > kMaxReduceOp) {
    return absl::InvalidArgumentError(absl::StrCat("unknown reduce op ", request.reduce_op()));
  }
  absl::StatusOr<Member> member = communicators_->Resolve(session, request.comm_handle());
  if (!member.ok()) return member.status();

  hw::CallDescriptor call;
  call.collective = static_cast<hw::Collective>(request.collective());
  call.comm = member->comm;
  call.rank = member->rank;
  call.root = request.root();
  call.peer = request.peer();
  call.tag = request.tag();
  call.datatype = static_cast<hw::DataType>(request.datatype());
  call.reduce_op = static_cast<hw::ReduceOp>(request.reduce_op());
  call.count = request.count();
  call.in_place = request.in_place();
  call.algorithm = request.algorithm();
  if (absl::Status valid = firmware::ValidateCall(call, member->size); !valid.ok()) {
    return valid;
  }

  const uint64_t element = hw::DataTypeSize(call.datatype);
  auto required_bytes = [&](hw::Slot slot) -> absl::StatusOr<uint64_t> {
    uint64_t elements = firmware::RequiredElements(call, member->size, slot);
    if (elements > UINT64_MAX / element) {
      return absl::InvalidArgumentError(absl::StrCat("count ", call.count, " of ",
                                                     std::string(hw::DataTypeName(call.datatype)),
                                                     " overflows the byte size"));
    }
    return elements * element;
  };
  absl::StatusOr<uint64_t> send_bytes = required_bytes(hw::Slot::kOp0);
  if (!send_bytes.ok()) return send_bytes.status();
  absl::StatusOr<uint64_t> recv_bytes = required_bytes(hw::Slot::kResult);
  if (!recv_bytes.ok()) return recv_bytes.status();

  hw::CallBuffers buffers;
  auto keep = std::make_shared<std::vector<SharedBufferPtr>>();
  const auto op0 = static_cast<size_t>(hw::Slot::kOp0);
  const auto result = static_cast<size_t>(hw::Slot::kResult);
  if (absl::Status status = ResolveBuffer(*session, "send", request.send(), *send_bytes,
                                          buffers.views[op0], *keep);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = ResolveBuffer(*session, "recv", request.recv(), *recv_bytes,
                                          buffers.views[result], *keep);
      !status.ok()) {
    return status;
  }
  buffers.keepalive = keep;

  const absl::Duration timeout = request.timeout_ms() > 0
                                     ? absl::Milliseconds(request.timeout_ms())
                                     : default_deadline_;
  const absl::Time start = absl::Now();
  const uint64_t op_id = session->StartOp();
  device_->Call(call, std::move(buffers), start + timeout,
                [session, op_id, start, comm = call.comm, this](hw::Completion completion) {
                  communicators_->OpFinished(comm, completion.status);
                  session->FinishOp(op_id, {std::move(completion), absl::Now() - start});
                });
  cclo::v1::SubmitResponse response;
  response.set_op_id(op_id);
  response.set_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(timeout)));
  return response;
}

}  // namespace cclo::daemon
