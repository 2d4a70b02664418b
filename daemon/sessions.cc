#include "daemon/sessions.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "cclo/v1/attach.h"
#include "hw/crypto.h"

namespace cclo::daemon {

absl::Status Session::AddBuffer(SharedBufferPtr buffer, Lease bytes, Lease count) {
  absl::MutexLock send_lock(&send_mu_);
  if (closed()) return absl::UnavailableError("session is closing");
  attach::Frame frame{attach::FrameType::kBuffer, buffer->id(), buffer->bytes(), ""};
  absl::Status sent = attach::SendFrame(attach_fd_, frame, {buffer->fd()});
  buffer->CloseFd();
  if (!sent.ok()) return sent;
  absl::MutexLock lock(&mu_);
  const uint64_t id = buffer->id();
  // The tenant's charge goes with the memory, not with the table entry: an op that still
  // uses a freed buffer keeps it, and its charge, until it ends.
  struct Charged {
    SharedBufferPtr buffer;
    Lease bytes;
    Lease count;
  };
  auto charged =
      std::make_shared<Charged>(Charged{std::move(buffer), std::move(bytes), std::move(count)});
  buffers_.emplace(id, SharedBufferPtr(charged, charged->buffer.get()));
  return absl::OkStatus();
}

absl::Status Session::RemoveBuffer(uint64_t buffer_id) {
  absl::MutexLock lock(&mu_);
  auto found = buffers_.find(buffer_id);
  if (found == buffers_.end()) {
    return absl::NotFoundError(absl::StrCat("no buffer ", buffer_id, " in this session"));
  }
  std::erase_if(freed_, [](const auto& entry) { return entry.second.expired(); });
  freed_.emplace(buffer_id, found->second);
  buffers_.erase(found);
  return absl::OkStatus();
}

absl::StatusOr<SharedBufferPtr> Session::FindBuffer(uint64_t buffer_id) const {
  absl::MutexLock lock(&mu_);
  auto found = buffers_.find(buffer_id);
  if (found == buffers_.end()) {
    return absl::NotFoundError(absl::StrCat("no buffer ", buffer_id, " in this session"));
  }
  return found->second;
}

Session::BufferCounts Session::CountBuffers() const {
  BufferCounts counts;
  for (const auto& [id, use] : Buffers()) {
    ++counts.count;
    counts.bytes += use.bytes;
  }
  return counts;
}

std::map<uint64_t, Session::BufferUse> Session::Buffers() const {
  // Let go after the lock: the op may have ended meanwhile, leaving these the last holders.
  std::vector<SharedBufferPtr> held;
  absl::MutexLock lock(&mu_);
  std::map<uint64_t, BufferUse> buffers;
  for (const auto& [id, buffer] : buffers_) buffers[id] = {buffer->bytes(), false};
  for (const auto& [id, freed] : freed_) {
    if (SharedBufferPtr buffer = freed.lock()) {
      buffers[id] = {buffer->bytes(), true};
      held.push_back(std::move(buffer));
    }
  }
  return buffers;
}

void Session::AddCommHandle(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  comm_handles_.insert(handle);
}

bool Session::RemoveCommHandle(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  const bool removed = comm_handles_.erase(handle) > 0;
  DropQueueLocked(handle);
  return removed;
}

void Session::DropQueueLocked(uint64_t handle) {
  auto found = waiting_by_handle_.find(handle);
  if (found != waiting_by_handle_.end() && found->second.empty() &&
      !comm_handles_.contains(handle)) {
    waiting_by_handle_.erase(found);
  }
}

std::vector<uint64_t> Session::CommHandles() const {
  absl::MutexLock lock(&mu_);
  return {comm_handles_.begin(), comm_handles_.end()};
}

Session::OpCounts Session::CountOps() const {
  absl::MutexLock lock(&mu_);
  OpCounts counts;
  for (const auto& [id, op] : ops_) {
    if (op.state == OpState::kWaiting) ++counts.queued;
    if (op.state == OpState::kStarted) ++counts.running;
  }
  counts.done = done_ops_;
  return counts;
}

bool Session::AwaitNoOps(hw::SteadyTime deadline) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return closed_ || ops_.empty(); };
  return hw::AwaitUntil(mu_, absl::Condition(&idle), deadline);
}

namespace {

/// Op ids are unique within the daemon, so an id of another session never names an op here.
uint64_t NextOpId() {
  static std::atomic<uint64_t> next_op_id{1};
  return next_op_id.fetch_add(1, std::memory_order_relaxed);
}

/// The result of an op that ends without reaching the engine.
OpResult Unstarted(hw::SteadyTime submitted, absl::Status status) {
  return {hw::Completion{std::move(status), "", 0}, hw::Since(submitted)};
}

/// Payload of an op aborted for a dependency: the message of the first op its chain aborted,
/// which names the failure that began it.
constexpr char kChainCause[] = "cclo-chain-cause";

/// Why an op ends when op `dependency`, which it waits for, failed with `status`. Past the
/// first two links of a chain the links between are left out ("...: "), and the message
/// names the failure that began it: ops each waiting for the one before, as many as the
/// inflight_ops quota, would otherwise each repeat all the messages before, quadratic in
/// memory and time when the first fails.
absl::Status DependencyFailed(uint64_t dependency, const absl::Status& status) {
  const absl::optional<absl::Cord> chain_cause = status.GetPayload(kChainCause);
  std::string cause;
  if (!chain_cause) {
    cause = std::string(status.message());
  } else if (*chain_cause == status.message()) {
    cause = std::string(*chain_cause);
  } else {
    cause = absl::StrCat("...: ", std::string(*chain_cause));
  }
  absl::Status aborted = absl::AbortedError(absl::StrCat(
      "op ", dependency,
      " that this op waits for failed: ", absl::StatusCodeToString(status.code()), ": ", cause));
  aborted.SetPayload(kChainCause, chain_cause ? *chain_cause : absl::Cord(aborted.message()));
  return aborted;
}

}  // namespace

std::string OpName::ToString() const {
  return absl::StrCat(std::string(hw::CollectiveName(collective)), " on rank ", rank,
                      " of communicator ", hw::CommIdHex(comm));
}

absl::StatusOr<uint64_t> Session::AddOp(NewOp new_op) {
  if (new_op.after.size() > kMaxAfter) {
    return absl::InvalidArgumentError(
        absl::StrCat("after lists ", new_op.after.size(), " ops; at most ", kMaxAfter));
  }
  absl::MutexLock launch_lock(&launch_mu_);
  const uint64_t id = NextOpId();
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::UnavailableError("session is closing");
    if (done_ops_ >= new_op.max_uncollected) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this session keeps ", done_ops_,
          " finished ops whose results were not collected, as many as it may (the tenant's "
          "inflight_ops quota plus two completion rings); Wait for them, or on the command "
          "ring release the failed ones"));
    }
    std::set<uint64_t> after;
    for (uint64_t dependency : new_op.after) {
      if (!after.insert(dependency).second) {
        return absl::InvalidArgumentError(absl::StrCat("after lists op ", dependency, " twice"));
      }
      if (ops_.find(dependency) == ops_.end()) {
        return absl::NotFoundError(
            absl::StrCat("after: no op ", dependency,
                         " in this session (never issued here, or already collected by Wait)"));
      }
    }
    Op op;
    op.comm_handle = new_op.comm_handle;
    op.submitted = hw::SteadyNow();
    op.what = std::move(new_op.what);
    op.start = std::move(new_op.start);
    op.ended = std::move(new_op.ended);
    op.done = std::move(new_op.done);
    std::optional<absl::Status> failed;
    for (uint64_t dependency : after) {
      Op& waited = ops_.at(dependency);
      if (waited.state != OpState::kDone) {
        op.waiting_for.insert(dependency);
        waited.dependents.push_back(id);
      } else if (!waited.result->completion.status.ok() && !failed) {
        failed = DependencyFailed(dependency, waited.result->completion.status);
      }
    }
    const hw::SteadyTime submitted = op.submitted;
    ops_.emplace(id, std::move(op));
    waiting_by_handle_[new_op.comm_handle].push_back(id);
    if (failed) EndLocked(id, Unstarted(submitted, *std::move(failed)));
  }
  // Still under launch_mu_: nothing reports the op's start or end before this.
  if (new_op.accepted) new_op.accepted();
  Pump();
  bool waiting;
  {
    absl::MutexLock lock(&mu_);
    auto found = ops_.find(id);
    waiting = found != ops_.end() && found->second.state == OpState::kWaiting;
  }
  // Still under launch_mu_: `held` runs before anything can start the op.
  if (waiting && new_op.held) new_op.held(id);
  return id;
}

void Session::FinishOp(uint64_t op_id, OpResult result) {
  absl::MutexLock launch_lock(&launch_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto found = ops_.find(op_id);
    if (found == ops_.end() || found->second.state != OpState::kStarted) return;
    EndLocked(op_id, std::move(result));
  }
  Pump();
}

absl::Status Session::CancelOp(uint64_t op_id) {
  absl::MutexLock launch_lock(&launch_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto found = ops_.find(op_id);
    if (found == ops_.end()) {
      return absl::NotFoundError(absl::StrCat("no op ", op_id, " pending in this session"));
    }
    switch (found->second.state) {
      case OpState::kStarted:
        return absl::FailedPreconditionError(
            absl::StrCat("op ", op_id,
                         " already went to the engine, where it runs with the other ranks; "
                         "it cannot be cancelled and goes on"));
      case OpState::kDone:
        return absl::FailedPreconditionError(absl::StrCat("op ", op_id, " already finished"));
      case OpState::kWaiting:
        EndLocked(op_id, Unstarted(found->second.submitted,
                                   absl::CancelledError(absl::StrCat(
                                       "op ", op_id, " was cancelled before it started"))));
        break;
    }
  }
  Pump();
  return absl::OkStatus();
}

std::optional<absl::Status> Session::ExpireOp(uint64_t op_id) {
  absl::MutexLock launch_lock(&launch_mu_);
  absl::Status expired;
  {
    absl::MutexLock lock(&mu_);
    auto found = ops_.find(op_id);
    if (found == ops_.end() || found->second.state != OpState::kWaiting) return std::nullopt;
    const Op& op = found->second;
    // A waiting op with nothing left to wait for is queued behind the front of its handle.
    const std::string reason =
        op.waiting_for.empty()
            ? absl::StrCat("queued behind op ", waiting_by_handle_.at(op.comm_handle).front(),
                           " on the same communicator")
            : absl::StrCat("waiting for op ", *op.waiting_for.begin());
    expired = absl::DeadlineExceededError(
        absl::StrCat(op.what.ToString(), " did not finish by its deadline: it was still ", reason));
    EndLocked(op_id, Unstarted(op.submitted, expired));
  }
  Pump();
  return expired;
}

void Session::Pump() {
  while (true) {
    std::vector<std::pair<OpEnded, absl::Status>> ends;
    std::vector<DoneReport> reports;
    std::optional<ReadyOp> ready;
    {
      absl::MutexLock lock(&mu_);
      ends.swap(unstarted_ends_);
      reports.swap(done_reports_);
      if (!closed_) ready = TakeReadyLocked();
    }
    for (auto& [ended, status] : ends) ended(status);
    for (DoneReport& report : reports) report.done(report.op_id, report.result);
    if (!ready) return;
    absl::Status started = ready->start(ready->id);
    if (started.ok()) continue;
    {
      absl::MutexLock lock(&mu_);
      auto found = ops_.find(ready->id);
      if (found != ops_.end() && found->second.state == OpState::kStarted) {
        EndLocked(ready->id, Unstarted(found->second.submitted, started));
      }
    }
    if (ready->ended) ready->ended(started);
  }
}

std::optional<Session::ReadyOp> Session::TakeReadyLocked() {
  for (auto& entry : waiting_by_handle_) {
    std::deque<uint64_t>& queue = entry.second;
    if (queue.empty()) continue;
    const uint64_t op_id = queue.front();
    Op& op = ops_.at(op_id);
    if (!op.waiting_for.empty()) continue;
    queue.pop_front();
    DropQueueLocked(op.comm_handle);
    op.state = OpState::kStarted;
    return ReadyOp{op_id, std::exchange(op.start, nullptr), std::exchange(op.ended, nullptr)};
  }
  return std::nullopt;
}

void Session::EndLocked(uint64_t op_id, OpResult result) {
  // Ending an op may abort the ops waiting for it, and theirs in turn: a work list, not
  // recursion, so that long chains cannot exhaust the stack.
  std::vector<std::pair<uint64_t, OpResult>> ending;
  ending.emplace_back(op_id, std::move(result));
  while (!ending.empty()) {
    auto [id, outcome] = std::move(ending.back());
    ending.pop_back();
    auto found = ops_.find(id);
    if (found == ops_.end() || found->second.state == OpState::kDone) continue;
    Op& op = found->second;
    const absl::Status status = outcome.completion.status;
    if (op.state == OpState::kWaiting) {
      std::deque<uint64_t>& queue = waiting_by_handle_.at(op.comm_handle);
      queue.erase(std::find(queue.begin(), queue.end(), id));
      DropQueueLocked(op.comm_handle);
      op.start = nullptr;  // never starts (its buffers go once `ended` has run)
      if (op.ended) unstarted_ends_.emplace_back(std::exchange(op.ended, nullptr), status);
    }
    op.state = OpState::kDone;
    ++done_ops_;
    op.result = std::move(outcome);
    if (op.done) done_reports_.push_back({std::exchange(op.done, nullptr), id, *op.result});
    for (uint64_t dependent_id : std::exchange(op.dependents, {})) {
      auto dependent = ops_.find(dependent_id);
      if (dependent == ops_.end() || dependent->second.state != OpState::kWaiting) continue;
      if (status.ok()) {
        dependent->second.waiting_for.erase(id);
      } else {
        ending.emplace_back(dependent_id,
                            Unstarted(dependent->second.submitted, DependencyFailed(id, status)));
      }
    }
  }
}

absl::StatusOr<std::optional<OpResult>> Session::WaitOp(uint64_t op_id, absl::Duration timeout,
                                                        const std::function<bool()>& caller_left) {
  absl::MutexLock lock(&mu_);
  auto not_found = [op_id] {
    return absl::NotFoundError(absl::StrCat("no op ", op_id, " pending in this session"));
  };
  if (closed_) return absl::UnavailableError("session is closing");
  if (ops_.find(op_id) == ops_.end()) return not_found();
  // Look the op up afresh on every check: a concurrent Wait may collect and erase it.
  auto done = [this, op_id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    auto op = ops_.find(op_id);
    return closed_ || op == ops_.end() || op->second.state == OpState::kDone;
  };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  if (closed_) return absl::UnavailableError("session is closing");
  auto found = ops_.find(op_id);
  if (found == ops_.end()) return not_found();
  if (found->second.state != OpState::kDone) return std::optional<OpResult>();
  // Collected for a caller that is gone, the result would be lost: no later Wait finds it.
  if (caller_left && caller_left()) {
    return absl::CancelledError(
        absl::StrCat("the Wait call ended (cancelled, or past its deadline); op ", op_id,
                     "'s result is kept for the next Wait"));
  }
  std::optional<OpResult> result = std::move(found->second.result);
  ops_.erase(found);
  --done_ops_;
  return result;
}

void Session::ReleaseOp(uint64_t op_id) {
  absl::MutexLock lock(&mu_);
  auto found = ops_.find(op_id);
  if (found != ops_.end() && found->second.state == OpState::kDone) {
    ops_.erase(found);
    --done_ops_;
  }
}

bool Session::HoldsResult(uint64_t op_id) const {
  absl::MutexLock lock(&mu_);
  auto found = ops_.find(op_id);
  return found != ops_.end() && found->second.state == OpState::kDone;
}

void Session::Close() {
  // As AddOp, FinishOp and the others: an op's start and end are reported under it.
  absl::MutexLock launch_lock(&launch_mu_);
  std::vector<std::pair<OpEnded, absl::Status>> ends;
  {
    absl::MutexLock send_lock(&send_mu_);  // no frame is being sent once this returns
    absl::MutexLock lock(&mu_);
    closed_ = true;
    buffers_.clear();
    lease_.Release();
    // Waiting ops never start; started ones finish in the engine and find nothing to update.
    ends.swap(unstarted_ends_);
    done_reports_.clear();
    for (auto& [id, op] : ops_) {
      if (op.state == OpState::kWaiting && op.ended) {
        ends.emplace_back(std::move(op.ended), absl::CancelledError(absl::StrCat(
                                                   "op ", id, " dropped: session closed")));
      }
    }
    ops_.clear();
    done_ops_ = 0;
    waiting_by_handle_.clear();
  }
  for (auto& [ended, status] : ends) ended(status);
}

bool Session::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

SessionPtr SessionRegistry::Create(PeerCredentials credentials, int attach_fd, TenantPtr tenant,
                                   Lease lease) {
  uint8_t secret[32];
  hw::RandomBytes(secret, sizeof(secret));
  absl::MutexLock lock(&mu_);
  auto session = std::make_shared<Session>(next_id_++, hw::Hex(secret, sizeof(secret)), credentials,
                                           attach_fd, std::move(tenant), std::move(lease));
  by_token_[session->token()] = session;
  by_id_[session->id()] = session;
  return session;
}

absl::StatusOr<SessionPtr> SessionRegistry::FindByToken(const std::string& token) const {
  absl::MutexLock lock(&mu_);
  auto found = by_token_.find(token);
  if (found == by_token_.end()) {
    return absl::UnauthenticatedError(
        "no live session for the cclo-session token; attach first (attach.sock)");
  }
  return found->second;
}

SessionPtr SessionRegistry::Remove(uint64_t session_id) {
  absl::MutexLock lock(&mu_);
  auto found = by_id_.find(session_id);
  if (found == by_id_.end()) return nullptr;
  SessionPtr session = found->second;
  by_id_.erase(found);
  by_token_.erase(session->token());
  return session;
}

std::vector<SessionPtr> SessionRegistry::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<SessionPtr> all;
  for (const auto& [id, session] : by_id_) all.push_back(session);
  return all;
}

}  // namespace cclo::daemon
