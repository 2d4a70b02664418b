#include "daemon/ops.h"

#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "firmware/contract.h"
#include "firmware/registry.h"
#include "hw/types.h"

namespace cclo::daemon {
namespace {

constexpr int kMaxDataType = static_cast<int>(hw::DataType::kFloat64);
constexpr int kMaxReduceOp = static_cast<int>(hw::ReduceOp::kMin);
constexpr int kMaxCollective = static_cast<int>(hw::kLastCollective);

/// Resolves one buffer reference for `slot` if the collective uses that slot.
absl::Status ResolveBuffer(const Session& session, const char* name, const BufferRange& ref,
                           uint64_t required_bytes, hw::BufferView& view, SharedBufferPtr& keep) {
  if (required_bytes == 0) return absl::OkStatus();
  absl::StatusOr<SharedBufferPtr> buffer = session.FindBuffer(ref.buffer_id);
  if (!buffer.ok()) {
    return absl::NotFoundError(absl::StrCat(name, " buffer: ", buffer.status().message()));
  }
  const uint64_t size = (*buffer)->bytes();
  if (ref.offset > size || ref.length > size - ref.offset) {
    return absl::InvalidArgumentError(absl::StrCat(name, " range [", ref.offset, ", +", ref.length,
                                                   ") is outside buffer ", ref.buffer_id, " of ",
                                                   size, " bytes"));
  }
  if (ref.length < required_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, " range of ", ref.length,
                                                   " bytes is smaller than the ", required_bytes,
                                                   " bytes the op needs"));
  }
  view = {(*buffer)->data() + ref.offset, ref.length};
  keep = *std::move(buffer);
  return absl::OkStatus();
}

// Whether a send range that starts where the recv range does is the call's in-place form:
// where that form reads the input from recv at the start, as the send would be read.
bool SameRangeIsInPlace(const hw::CallDescriptor& call) {
  switch (call.collective) {
    case hw::Collective::kAllreduce:
    case hw::Collective::kReduceScatter:
    case hw::Collective::kAlltoall:
      return true;
    case hw::Collective::kReduce:
      return call.rank == call.root;
    default:
      return false;
  }
}

// A collective reads its input while it writes its result, in whatever order its algorithm
// makes the moves. One range as both send and recv runs as the in-place form where that is
// the same thing (SameRangeIsInPlace); any other overlap of the two is refused, as MPI
// allows shared memory only through MPI_IN_PLACE.
absl::Status ResolveOverlap(hw::CallDescriptor& call, hw::CallBuffers& buffers, uint64_t send_bytes,
                            uint64_t recv_bytes) {
  hw::BufferView& input = buffers.views[static_cast<size_t>(hw::Slot::kOp0)];
  hw::BufferView& output = buffers.views[static_cast<size_t>(hw::Slot::kResult)];
  // The bytes the op uses count, not the (longer) ranges the caller may have named.
  if (call.in_place || input.data == nullptr || output.data == nullptr ||
      input.data >= output.data + recv_bytes || output.data >= input.data + send_bytes) {
    return absl::OkStatus();
  }
  if (input.data == output.data && SameRangeIsInPlace(call)) {
    call.in_place = true;
    output.bytes = std::max(output.bytes, input.bytes);  // both within the one buffer
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(hw::CollectiveName(call.collective)),
      ": send and recv ranges overlap; only the in-place form may share memory (in_place, or "
      "one range for both in allreduce, reduce_scatter, alltoall and reduce at the root)"));
}

}  // namespace

cclo::v1::WaitResponse ToWaitResponse(const OpResult& done) {
  cclo::v1::WaitResponse response;
  response.set_done(true);
  response.set_code(static_cast<int32_t>(done.completion.status.code()));
  response.set_message(std::string(done.completion.status.message()));
  response.set_algorithm(done.completion.algorithm);
  response.set_elapsed_us(static_cast<uint64_t>(absl::ToInt64Microseconds(done.elapsed)));
  if (!done.chosen_by.empty()) {
    response.set_protocol(std::string(hw::ProtocolName(done.protocol)));
    response.set_segment_bytes(done.segment_bytes);
    response.set_chosen_by(done.chosen_by);
    response.set_policy_version(done.policy_version);
  }
  return response;
}

ring::CompletionSlot ToCompletion(uint64_t cookie, uint64_t op_id, const OpResult& done) {
  ring::CompletionSlot slot{};
  slot.cookie = cookie;
  slot.op_id = op_id;
  slot.kind = static_cast<uint32_t>(ring::CompletionKind::kFinished);
  slot.code = static_cast<int32_t>(done.completion.status.code());
  slot.elapsed_us = static_cast<uint64_t>(absl::ToInt64Microseconds(done.elapsed));
  const absl::string_view message = done.completion.status.message();
  ring::PutText({message.data(), message.size()}, slot.message, ring::kMessageBytes);
  ring::PutText(done.completion.algorithm, slot.algorithm, ring::kAlgorithmBytes);
  if (!done.chosen_by.empty()) {
    ring::PutText(hw::ProtocolName(done.protocol), slot.protocol, ring::kProtocolBytes);
    slot.segment_bytes = done.segment_bytes;
    ring::PutText(done.chosen_by, slot.chosen_by, ring::kChosenByBytes);
    slot.policy_version = done.policy_version;
  }
  return slot;
}

Ops::Ops(hw::Device* device, Communicators* communicators, OpStats* stats, const Drain* drain,
         absl::Duration default_deadline)
    : device_(device),
      communicators_(communicators),
      stats_(stats),
      drain_(drain),
      default_deadline_(default_deadline) {}

Ops::~Ops() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (expire_thread_.joinable()) expire_thread_.join();
}

absl::Status Ops::StartDeadlines() {
  return hw::StartThread(expire_thread_, "op deadlines", [this] { ExpireLoop(); });
}

void Ops::CountRefused(const absl::Status& refusal) { stats_->Refused(refusal.code()); }

struct Ops::Launch {
  std::weak_ptr<Session> session;  ///< weak: the op kept in the session must not keep it
  uint64_t handle = 0;
  hw::CallDescriptor call;
  hw::CallBuffers buffers;  ///< its keepalive is set when the call is made
  std::array<SharedBufferPtr, 2> held_buffers;
  hw::SteadyTime submitted;
  hw::SteadyTime deadline;
  OpName what;
  /// On the tenant's in-flight ops quota until the op ends, however it ends: through
  /// `ended` if it never reaches the engine, else through the engine's completion.
  Lease inflight;
  OpLabels labels;
  std::string chosen_by;
  uint64_t policy_version = 0;
  /// Whether the op was held, so that its deadline is watched, and its id (set under the
  /// session's launch lock, under which its start or unstarted end runs too).
  bool held = false;
  uint64_t op_id = 0;
};

absl::StatusOr<std::shared_ptr<Ops::Launch>> Ops::Prepare(const SessionPtr& session,
                                                          OpRequest& request) const {
  if (request.collective < 0 || request.collective > kMaxCollective) {
    return absl::InvalidArgumentError(absl::StrCat("unknown collective ", request.collective));
  }
  if (request.datatype < 0 || request.datatype > kMaxDataType) {
    return absl::InvalidArgumentError(absl::StrCat("unknown datatype ", request.datatype));
  }
  if (request.reduce_op < 0 || request.reduce_op > kMaxReduceOp) {
    return absl::InvalidArgumentError(absl::StrCat("unknown reduce op ", request.reduce_op));
  }
  // What a command slot holds, longer than any algorithm's name: a longer one names none,
  // and every op held with it would keep it (megabytes a Submit may carry).
  if (request.algorithm.size() >= ring::kAlgorithmBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "algorithm name of ", request.algorithm.size(),
        " bytes is longer than any algorithm's (at most ", ring::kAlgorithmBytes - 1, ")"));
  }
  absl::StatusOr<Member> member = communicators_->Resolve(session, request.comm_handle);
  if (!member.ok()) return member.status();

  auto launch = std::make_shared<Launch>();
  hw::CallDescriptor& call = launch->call;
  call.collective = static_cast<hw::Collective>(request.collective);
  call.comm = member->comm;
  call.rank = member->rank;
  call.root = request.root;
  call.peer = request.peer;
  call.tag = request.tag;
  call.datatype = static_cast<hw::DataType>(request.datatype);
  call.reduce_op = static_cast<hw::ReduceOp>(request.reduce_op);
  call.count = request.count;
  call.in_place = request.in_place;
  call.algorithm = std::move(request.algorithm);
  call.tenant = session->tenant()->index();
  if (absl::Status valid = firmware::ValidateCall(call, member->size); !valid.ok()) {
    return valid;
  }
  // The engine ignores it, but the byte counters would add it up.
  if ((call.collective == hw::Collective::kBarrier || call.collective == hw::Collective::kNop) &&
      call.count != 0) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(hw::CollectiveName(call.collective)),
                                                   " moves no data: its count must be 0, not ",
                                                   call.count));
  }

  absl::StatusOr<uint64_t> send_bytes = firmware::RequiredBytes(call, member->size, hw::Slot::kOp0);
  if (!send_bytes.ok()) return send_bytes.status();
  absl::StatusOr<uint64_t> recv_bytes =
      firmware::RequiredBytes(call, member->size, hw::Slot::kResult);
  if (!recv_bytes.ok()) return recv_bytes.status();

  hw::CallBuffers& buffers = launch->buffers;
  const auto op0 = static_cast<size_t>(hw::Slot::kOp0);
  const auto result = static_cast<size_t>(hw::Slot::kResult);
  if (absl::Status status = ResolveBuffer(*session, "send", request.send, *send_bytes,
                                          buffers.views[op0], launch->held_buffers[0]);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = ResolveBuffer(*session, "recv", request.recv, *recv_bytes,
                                          buffers.views[result], launch->held_buffers[1]);
      !status.ok()) {
    return status;
  }
  if (absl::Status overlap = ResolveOverlap(call, buffers, *send_bytes, *recv_bytes);
      !overlap.ok()) {
    return overlap;
  }

  // Every rank chooses from the same snapshot and the same fields, so they agree. The
  // message bytes fit: some buffer above holds them.
  const cclo::v1::CommPolicy& policy = *member->policy;
  PolicyChoice choice = ChooseFor(policy, call.collective, call.datatype,
                                  call.count * hw::DataTypeSize(call.datatype), member->size);
  if (call.algorithm.empty()) call.algorithm = choice.algorithm;
  call.protocol = choice.protocol;
  call.segment_bytes = choice.segment_bytes;
  launch->chosen_by = std::move(choice.rule);
  launch->policy_version = policy.policy().version();
  return launch;
}

absl::Status Ops::Check(const SessionPtr& session, OpRequest request) const {
  return Prepare(session, request).status();
}

absl::StatusOr<Accepted> Ops::Submit(const SessionPtr& session, OpRequest request, OpDone done,
                                     const Tenant::StillWanted& caller_wants) {
  if (absl::Status admitted = drain_->Admit("new ops"); !admitted.ok()) return admitted;
  absl::StatusOr<std::shared_ptr<Launch>> prepared = Prepare(session, request);
  if (!prepared.ok()) return prepared.status();
  std::shared_ptr<Launch> launch = *std::move(prepared);
  const hw::CallDescriptor& call = launch->call;

  const absl::Duration timeout = TimeoutOf(request);
  launch->submitted = hw::SteadyNow();
  launch->deadline = hw::SteadyNow() + timeout;
  const TenantPtr& tenant = session->tenant();
  auto still_wanted = [&session, &caller_wants]() -> absl::Status {
    if (session->closed()) return absl::UnavailableError("session is closing");
    return caller_wants ? caller_wants() : absl::OkStatus();
  };
  absl::StatusOr<Lease> room = tenant->Acquire(
      Resource::kInflightOps, 1,
      request.wait_for_room ? launch->deadline : hw::SteadyTime::InfinitePast(), still_wanted);
  if (!room.ok() && room.status().code() != absl::StatusCode::kResourceExhausted) {
    return room.status();  // the daemon stops, the session closed or the caller left
  }
  if (!room.ok()) {
    const std::string retry_ms = absl::StrCat(absl::ToInt64Milliseconds(tenant->RetryHint()));
    absl::Status full = absl::ResourceExhaustedError(
        absl::StrCat(room.status().message(), "; retry after ", retry_ms, " ms"));
    full.SetPayload(kRetryAfterMs, absl::Cord(retry_ms));
    return full;
  }
  // Held until the op is registered: a drain that begins now waits for it, and one that
  // began (also while this waited for room) refuses it.
  absl::StatusOr<Drain::Admission> admission = drain_->Enter("new ops");
  if (!admission.ok()) return admission.status();
  launch->inflight = *std::move(room);
  launch->session = session;
  launch->handle = request.comm_handle;
  launch->what = {call.collective, call.rank, call.comm};
  launch->labels = {tenant->name(), call.collective, call.protocol,
                    call.count * hw::DataTypeSize(call.datatype)};

  NewOp op;
  op.comm_handle = request.comm_handle;
  op.after = std::move(request.after);
  // A ring client that collects all its results still has up to a ring of them posted and
  // not consumed, and a ring consumed but not yet released (that waits until the daemon
  // took the commands posted before the consumption), beside those of its ops in flight.
  op.max_uncollected = tenant->Limits()[static_cast<size_t>(Resource::kInflightOps)] +
                       2 * uint64_t{ring::kCompletionSlots};
  op.done = std::move(done);
  op.what = launch->what;
  // `accepted` and `held` run before AddOp returns, while `launch` is held here: they take
  // it by plain pointer (which std::function keeps without allocating).
  // Communicators counts every accepted op as in flight until it ends, however it ends.
  op.accepted = [this, op_launch = launch.get()] {
    communicators_->OpStarted(op_launch->call.comm);
  };
  op.held = [this, op_launch = launch.get()](uint64_t op_id) {
    op_launch->held = true;
    op_launch->op_id = op_id;
    if (SessionPtr owner = op_launch->session.lock()) Watch({op_launch->deadline, op_id}, owner);
  };
  op.ended = [this, launch](const absl::Status& status) {
    // Cancelled, aborted or dropped while held: its deadline is no longer watched.
    if (launch->held) Unwatch({launch->deadline, launch->op_id});
    // Still before any later op of its communicator handle starts (Session::Pump): a
    // withdrawn collective keeps its place in the engine's order.
    if (absl::IsCancelled(status) || absl::IsAborted(status)) {
      device_->Withdraw(launch->call, status);
    }
    launch->inflight.Release();
    communicators_->OpFinished(launch->call.comm, launch->call.rank, status);
    stats_->Finished(launch->labels, "", hw::Since(launch->submitted), status);
  };
  op.start = [this, launch](uint64_t op_id) { return Start(launch, op_id); };
  absl::StatusOr<uint64_t> op_id = session->AddOp(std::move(op));
  if (!op_id.ok()) return op_id.status();
  return Accepted{*op_id, static_cast<uint32_t>(absl::ToInt64Milliseconds(timeout))};
}

absl::Status Ops::Start(const std::shared_ptr<Launch>& launch, uint64_t op_id) {
  if (launch->held) Unwatch({launch->deadline, op_id});
  SessionPtr owner = launch->session.lock();
  if (!owner) return absl::UnavailableError("session is closing");
  const hw::CallDescriptor& call = launch->call;
  // The communicator may have broken or gone while the op waited (held, or for quota room);
  // a handle that went since Submit took the op was destroyed (a session's end drops its ops).
  if (absl::StatusOr<Member> member = communicators_->Resolve(owner, launch->handle);
      !member.ok()) {
    if (absl::IsNotFound(member.status())) {
      return absl::UnavailableError(Communicators::Destroyed(call.rank));
    }
    return member.status();
  }
  if (hw::SteadyNow() >= launch->deadline) {
    return absl::DeadlineExceededError(
        absl::StrCat(launch->what.ToString(),
                     " did not finish by its deadline: the ops it waited for took all its time"));
  }
  stats_->Started(launch->labels, hw::Since(launch->submitted));
  hw::CallBuffers buffers = launch->buffers;
  buffers.keepalive = std::shared_ptr<const void>(launch, &launch->held_buffers);
  device_->Call(
      call, std::move(buffers), launch->deadline,
      [this, owner, op_id, launch](hw::Completion completion) {
        // The engine forgot the communicator after the handle was found above.
        if (absl::IsNotFound(completion.status)) {
          completion.status = communicators_->Forgotten(launch->call.comm, launch->call.rank);
        }
        const absl::Duration elapsed = hw::Since(launch->submitted);
        launch->inflight.Release();
        owner->tenant()->RecordOpTime(elapsed);
        communicators_->OpFinished(launch->call.comm, launch->call.rank, completion.status,
                                   completion.bytes_sent);
        stats_->Finished(launch->labels, completion.algorithm, elapsed, completion.status);
        owner->FinishOp(op_id,
                        {std::move(completion), elapsed, launch->call.protocol,
                         launch->call.segment_bytes, launch->chosen_by, launch->policy_version});
      });
  return absl::OkStatus();
}

void Ops::EndSession(const SessionPtr& session) {
  absl::MutexLock lock(&mu_);
  std::erase_if(watched_, [&](const auto& entry) { return entry.second.lock() == session; });
}

void Ops::Watch(WatchKey key, const SessionPtr& session) {
  absl::MutexLock lock(&mu_);
  // Checked under mu_: a session that closes later has its entries erased by EndSession.
  if (session->closed()) return;
  auto [entry, inserted] = watched_.emplace(key, session);
  if (inserted && entry == watched_.begin()) wake_.Signal();
}

void Ops::Unwatch(WatchKey key) {
  absl::MutexLock lock(&mu_);
  watched_.erase(key);
}

void Ops::ExpireLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (watched_.empty()) {
      wake_.Wait(&mu_);
      continue;
    }
    auto first = watched_.begin();
    if (hw::SteadyNow() < first->first.first) {
      wake_.WaitWithTimeout(&mu_, hw::Left(first->first.first));
      continue;
    }
    const uint64_t op_id = first->first.second;
    std::weak_ptr<Session> due = std::move(first->second);
    watched_.erase(first);
    // The session is called without mu_: expiring settles other ops, whose start may
    // Unwatch. The op's OpEnded reports the expiry, which breaks its communicator.
    mu_.Unlock();
    if (SessionPtr session = due.lock()) session->ExpireOp(op_id);
    mu_.Lock();
  }
}

}  // namespace cclo::daemon
