#include "cclo/communicator.h"

#include "absl/strings/str_cat.h"
#include "client/session.h"
#include "firmware/contract.h"
#include "hw/clock.h"

namespace cclo {
namespace {

// Describes the bytes that buffer `slot` of `call` needs, from `offset` of `buffer`, as a
// BufferRef, after checking that `buffer` may be named in `session`, that the call's
// datatype is one and that the range lies inside the buffer.
absl::Status SetRange(const std::shared_ptr<client::Session>& session, const Buffer& buffer,
                      uint64_t offset, const hw::CallDescriptor& call, uint32_t world_size,
                      hw::Slot slot, v1::BufferRef& ref) {
  if (absl::Status ours = buffer.CheckSession(session); !ours.ok()) return ours;
  if (call.datatype > DataType::kFloat64) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown datatype ", static_cast<int>(call.datatype)));  // as cclod says it
  }
  absl::StatusOr<uint64_t> length = firmware::RequiredBytes(call, world_size, slot);
  if (!length.ok()) return length.status();
  if (offset > buffer.size() || *length > buffer.size() - offset) {
    return absl::OutOfRangeError(absl::StrCat("range of ", *length, " bytes at offset ", offset,
                                              " exceeds buffer ", buffer.id(), " of ",
                                              buffer.size(), " bytes"));
  }
  ref.set_buffer_id(buffer.id());
  ref.set_offset(offset);
  ref.set_length(*length);
  return absl::OkStatus();
}

// A send, recv or bcast of `count` elements of `type`.
hw::CallDescriptor Call(hw::Collective collective, uint64_t count, DataType type) {
  hw::CallDescriptor call;
  call.collective = collective;
  call.count = count;
  call.datatype = type;
  return call;
}

// Whether `options.in_place` goes to the daemon: rooted collectives have it at the root only,
// so it is dropped elsewhere and every rank may pass the same options.
bool InPlaceHere(hw::Collective collective, uint32_t rank, uint32_t root,
                 const OpOptions& options) {
  if (!options.in_place) return false;
  return !(hw::HasInPlace(collective) && hw::HasRoot(collective) && rank != root);
}

// Blocking form of an op: submit, then wait for the result.
absl::Status WaitFor(absl::StatusOr<Request> request) {
  if (!request.ok()) return request.status();
  return request->Wait();
}

}  // namespace

Communicator::Communicator(std::shared_ptr<client::Session> session, uint64_t handle, uint32_t rank,
                           uint32_t size, std::string id_hex)
    : session_(std::move(session)),
      handle_(handle),
      rank_(rank),
      size_(size),
      id_hex_(std::move(id_hex)) {}

absl::Status Communicator::CheckNotDestroyed(bool wait) {
  if (wait) {
    absl::MutexLock lock(&destroy_mutex_);  // taken and let go: a Destroy() in progress ended
  }
  if (!destroyed_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("communicator ", id_hex_, " was destroyed"));
}

absl::StatusOr<Request> Communicator::Submit(v1::SubmitRequest& request, const OpOptions& options) {
  if (absl::Status live = CheckNotDestroyed(); !live.ok()) return live;
  request.set_comm_handle(handle_);
  if (!options.algorithm.empty()) request.set_algorithm(options.algorithm);  // else no string
  request.set_wait_for_room(options.wait_for_room);
  request.set_in_place(InPlaceHere(static_cast<hw::Collective>(request.collective()), rank_,
                                   request.root(), options));
  absl::StatusOr<uint32_t> timeout_ms = client::TimeoutMillis(options.timeout, "op");
  if (!timeout_ms.ok()) return timeout_ms.status();
  request.set_timeout_ms(*timeout_ms);
  std::vector<client::ClientRing::Dependency> after;
  for (const Request* dependency : options.after) {
    if (dependency == nullptr) return absl::InvalidArgumentError("after: a null request");
    if (!dependency->session_) {
      return absl::InvalidArgumentError(absl::StrCat("after: ", dependency->MovedFrom().message()));
    }
    if (dependency->session_ != session_) {
      return absl::InvalidArgumentError(
          absl::StrCat("after: op ", dependency->op_id_, " belongs to another Client"));
    }
    // The daemon forgets an op once its result was collected; this process knows it.
    if (!dependency->done()) {
      after.push_back({dependency->cookie_, dependency->op_id_});
    } else if (!dependency->status_.ok()) {
      return absl::AbortedError(absl::StrCat(
          "op ", dependency->op_id_,
          " that this op waits for failed: ", absl::StatusCodeToString(dependency->status_.code()),
          ": ", std::string(dependency->status_.message())));
    }
  }
  // Waiting for room may take until the op's deadline (unknown here when the daemon's
  // default applies: then at most kRoomWait).
  constexpr absl::Duration kRoomWait = absl::Minutes(10);
  const absl::Duration room_wait = !options.wait_for_room ? absl::ZeroDuration()
                                   : options.timeout > absl::ZeroDuration() ? options.timeout
                                                                            : kRoomWait;
  const hw::SteadyTime submitted_at = hw::SteadyNow();
  auto accepted = session_->ring().Submit(std::move(request), after,
                                          submitted_at + session_->rpc_timeout() + room_wait);
  if (!accepted.ok()) {
    if (absl::IsNotFound(accepted.status())) {
      if (absl::Status live = CheckNotDestroyed(/*wait=*/true); !live.ok()) return live;
    }
    return absl::Status(accepted.status().code(),
                        absl::StrCat("Submit: ", accepted.status().message()));
  }
  const auto& [cookie, answer] = *accepted;
  // The daemon ends every op by its deadline, which it counts from taking the op (for one
  // that waited for room, what is left of it); past that plus a grace, stop waiting.
  const hw::SteadyTime report_by =
      hw::SteadyNow() + absl::Milliseconds(answer.timeout_ms) + Request::kReportGrace;
  return Request(session_, answer.op_id, cookie, report_by);
}

absl::StatusOr<Request> Communicator::SubmitCollective(hw::Collective collective,
                                                       const Buffer* send, Buffer* recv,
                                                       uint64_t count, DataType type, ReduceOp op,
                                                       uint32_t root, const OpOptions& options) {
  hw::CallDescriptor call;
  call.collective = collective;
  call.rank = rank_;
  call.root = root;
  call.count = count;
  call.datatype = type;
  call.in_place = InPlaceHere(collective, rank_, root, options);
  v1::SubmitRequest request;
  request.set_collective(static_cast<v1::Collective>(collective));
  request.set_count(count);
  request.set_datatype(static_cast<v1::DataType>(type));
  request.set_reduce_op(static_cast<v1::ReduceOp>(op));
  request.set_root(root);
  const std::string name(hw::CollectiveName(collective));
  if (firmware::RequiredElements(call, size_, hw::Slot::kOp0) > 0) {
    if (absl::Status range =
            SetRange(session_, *send, 0, call, size_, hw::Slot::kOp0, *request.mutable_send());
        !range.ok()) {
      return absl::Status(range.code(), absl::StrCat(name, " send: ", range.message()));
    }
  }
  if (firmware::RequiredElements(call, size_, hw::Slot::kResult) > 0) {
    if (absl::Status range =
            SetRange(session_, *recv, 0, call, size_, hw::Slot::kResult, *request.mutable_recv());
        !range.ok()) {
      return absl::Status(range.code(), absl::StrCat(name, " recv: ", range.message()));
    }
  }
  return Submit(request, options);
}

absl::StatusOr<Request> Communicator::SendAsync(const Buffer& buffer, uint64_t offset,
                                                uint64_t count, DataType type, uint32_t peer,
                                                uint32_t tag, const OpOptions& options) {
  v1::SubmitRequest request;
  request.set_collective(v1::SEND);
  request.set_count(count);
  request.set_datatype(static_cast<v1::DataType>(type));
  request.set_peer(peer);
  request.set_tag(tag);
  if (absl::Status range =
          SetRange(session_, buffer, offset, Call(hw::Collective::kSend, count, type), size_,
                   hw::Slot::kOp0, *request.mutable_send());
      !range.ok()) {
    return range;
  }
  return Submit(request, options);
}

absl::StatusOr<Request> Communicator::RecvAsync(Buffer& buffer, uint64_t offset, uint64_t count,
                                                DataType type, uint32_t peer, uint32_t tag,
                                                const OpOptions& options) {
  v1::SubmitRequest request;
  request.set_collective(v1::RECV);
  request.set_count(count);
  request.set_datatype(static_cast<v1::DataType>(type));
  request.set_peer(peer);
  request.set_tag(tag);
  if (absl::Status range =
          SetRange(session_, buffer, offset, Call(hw::Collective::kRecv, count, type), size_,
                   hw::Slot::kResult, *request.mutable_recv());
      !range.ok()) {
    return range;
  }
  return Submit(request, options);
}

absl::StatusOr<Request> Communicator::BcastAsync(Buffer& buffer, uint64_t offset, uint64_t count,
                                                 DataType type, uint32_t root,
                                                 const OpOptions& options) {
  v1::SubmitRequest request;
  request.set_collective(v1::BCAST);
  request.set_count(count);
  request.set_datatype(static_cast<v1::DataType>(type));
  request.set_root(root);
  if (absl::Status range =
          SetRange(session_, buffer, offset, Call(hw::Collective::kBcast, count, type), size_,
                   hw::Slot::kResult, *request.mutable_recv());
      !range.ok()) {
    return range;
  }
  return Submit(request, options);
}

absl::StatusOr<Request> Communicator::ScatterAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                                   DataType type, uint32_t root,
                                                   const OpOptions& options) {
  return SubmitCollective(hw::Collective::kScatter, &send, &recv, count, type, ReduceOp::kSum, root,
                          options);
}

absl::StatusOr<Request> Communicator::GatherAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                                  DataType type, uint32_t root,
                                                  const OpOptions& options) {
  return SubmitCollective(hw::Collective::kGather, &send, &recv, count, type, ReduceOp::kSum, root,
                          options);
}

absl::StatusOr<Request> Communicator::AllgatherAsync(const Buffer& send, Buffer& recv,
                                                     uint64_t count, DataType type,
                                                     const OpOptions& options) {
  return SubmitCollective(hw::Collective::kAllgather, &send, &recv, count, type, ReduceOp::kSum, 0,
                          options);
}

absl::StatusOr<Request> Communicator::ReduceAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                                  DataType type, ReduceOp op, uint32_t root,
                                                  const OpOptions& options) {
  return SubmitCollective(hw::Collective::kReduce, &send, &recv, count, type, op, root, options);
}

absl::StatusOr<Request> Communicator::AllreduceAsync(const Buffer& send, Buffer& recv,
                                                     uint64_t count, DataType type, ReduceOp op,
                                                     const OpOptions& options) {
  return SubmitCollective(hw::Collective::kAllreduce, &send, &recv, count, type, op, 0, options);
}

absl::StatusOr<Request> Communicator::ReduceScatterAsync(const Buffer& send, Buffer& recv,
                                                         uint64_t count, DataType type, ReduceOp op,
                                                         const OpOptions& options) {
  return SubmitCollective(hw::Collective::kReduceScatter, &send, &recv, count, type, op, 0,
                          options);
}

absl::StatusOr<Request> Communicator::AlltoallAsync(const Buffer& send, Buffer& recv,
                                                    uint64_t count, DataType type,
                                                    const OpOptions& options) {
  return SubmitCollective(hw::Collective::kAlltoall, &send, &recv, count, type, ReduceOp::kSum, 0,
                          options);
}

absl::StatusOr<Request> Communicator::BarrierAsync(const OpOptions& options) {
  return SubmitCollective(hw::Collective::kBarrier, nullptr, nullptr, 0, DataType::kInt8,
                          ReduceOp::kSum, 0, options);
}

absl::Status Communicator::Send(const Buffer& buffer, uint64_t offset, uint64_t count,
                                DataType type, uint32_t peer, uint32_t tag,
                                const OpOptions& options) {
  return WaitFor(SendAsync(buffer, offset, count, type, peer, tag, options));
}

absl::Status Communicator::Recv(Buffer& buffer, uint64_t offset, uint64_t count, DataType type,
                                uint32_t peer, uint32_t tag, const OpOptions& options) {
  return WaitFor(RecvAsync(buffer, offset, count, type, peer, tag, options));
}

absl::Status Communicator::Bcast(Buffer& buffer, uint64_t offset, uint64_t count, DataType type,
                                 uint32_t root, const OpOptions& options) {
  return WaitFor(BcastAsync(buffer, offset, count, type, root, options));
}

absl::Status Communicator::Scatter(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                                   uint32_t root, const OpOptions& options) {
  return WaitFor(ScatterAsync(send, recv, count, type, root, options));
}

absl::Status Communicator::Gather(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                                  uint32_t root, const OpOptions& options) {
  return WaitFor(GatherAsync(send, recv, count, type, root, options));
}

absl::Status Communicator::Allgather(const Buffer& send, Buffer& recv, uint64_t count,
                                     DataType type, const OpOptions& options) {
  return WaitFor(AllgatherAsync(send, recv, count, type, options));
}

absl::Status Communicator::Reduce(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                                  ReduceOp op, uint32_t root, const OpOptions& options) {
  return WaitFor(ReduceAsync(send, recv, count, type, op, root, options));
}

absl::Status Communicator::Allreduce(const Buffer& send, Buffer& recv, uint64_t count,
                                     DataType type, ReduceOp op, const OpOptions& options) {
  return WaitFor(AllreduceAsync(send, recv, count, type, op, options));
}

absl::Status Communicator::ReduceScatter(const Buffer& send, Buffer& recv, uint64_t count,
                                         DataType type, ReduceOp op, const OpOptions& options) {
  return WaitFor(ReduceScatterAsync(send, recv, count, type, op, options));
}

absl::Status Communicator::Alltoall(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                                    const OpOptions& options) {
  return WaitFor(AlltoallAsync(send, recv, count, type, options));
}

absl::Status Communicator::Barrier(const OpOptions& options) {
  return WaitFor(BarrierAsync(options));
}

absl::StatusOr<Request> Communicator::NopAsync(const OpOptions& options) {
  return SubmitCollective(hw::Collective::kNop, nullptr, nullptr, 0, DataType::kInt8,
                          ReduceOp::kSum, 0, options);
}

absl::Status Communicator::Nop(const OpOptions& options) { return WaitFor(NopAsync(options)); }

absl::Status Communicator::Destroy() {
  if (destroyed_) return absl::OkStatus();
  if (absl::Status open = session_->ring().CheckOpen(); !open.ok()) return open;
  // A call that waited here for another finds what a later call would.
  absl::MutexLock lock(&destroy_mutex_);
  if (destroyed_) return absl::OkStatus();
  v1::DestroyCommunicatorRequest request;
  request.set_comm_handle(handle_);
  v1::DestroyCommunicatorResponse response;
  grpc::ClientContext context;
  session_->Prepare(context, session_->rpc_timeout());
  grpc::Status status = session_->stub().DestroyCommunicator(&context, request, &response);
  if (!status.ok()) return session_->FromGrpc(status, "DestroyCommunicator");
  destroyed_ = true;
  return absl::OkStatus();
}

}  // namespace cclo
