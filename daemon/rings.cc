#include "daemon/rings.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

/// While the engine sleeps, how often it looks again at a parked command (waiting for room
/// in its tenant's quota) and at completions kept for want of room in the completion ring.
constexpr int kRetryMs = 1;
/// epoll data of the wake eventfd (session ids start at 1).
constexpr uint64_t kWakeId = 0;

ring::CompletionSlot Refusal(uint64_t cookie, const absl::Status& status) {
  ring::CompletionSlot slot{};
  slot.cookie = cookie;
  slot.kind = static_cast<uint32_t>(ring::CompletionKind::kRejected);
  slot.code = static_cast<int32_t>(status.code());
  const absl::string_view message = status.message();
  ring::PutText({message.data(), message.size()}, slot.message, ring::kMessageBytes);
  return slot;
}

/// Whether the tenant's in-flight ops quota has room now (retrying a parked command only
/// then keeps the quota's refusal count as the Submit RPC's waiting leaves it).
bool HasInflightRoom(const Tenant& tenant) {
  const auto slot = static_cast<size_t>(Resource::kInflightOps);
  return tenant.Usage()[slot] < tenant.Limits()[slot];
}

void SignalEventfd(int eventfd) {
  const uint64_t one = 1;
  (void)!write(eventfd, &one, sizeof(one));
}

void ClearEventfd(int eventfd) {
  uint64_t count;
  (void)!read(eventfd, &count, sizeof(count));
}

/// Clears a session's command doorbell without waiting: its client shares the eventfd's open
/// file, so it may have made it blocking and emptied it since epoll found it readable.
void ClearDoorbell(int doorbell) {
  uint64_t count;
  iovec into{&count, sizeof(count)};
  if (preadv2(doorbell, &into, 1, -1, RWF_NOWAIT) < 0 && errno == EOPNOTSUPP) {
    ClearEventfd(doorbell);  // a kernel before 5.12: no eventfd reads that cannot wait
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Rings>> Rings::Create(Ops* ops) {
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return absl::InternalError(absl::StrCat("epoll: ", std::strerror(errno)));
  int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeId;
  if (wake_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &event) != 0) {
    absl::Status status = absl::InternalError(absl::StrCat("ring wake fd: ", std::strerror(errno)));
    if (wake_fd >= 0) close(wake_fd);
    close(epoll_fd);
    return status;
  }
  return std::unique_ptr<Rings>(new Rings(ops, epoll_fd, wake_fd));
}

Rings::Rings(Ops* ops, int epoll_fd, int wake_fd)
    : ops_(ops), epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

Rings::~Rings() {
  served_.clear();
  {
    absl::MutexLock lock(&mu_);
    opened_.clear();
    sessions_.clear();
  }
  close(wake_fd_);
  close(epoll_fd_);
}

absl::StatusOr<std::vector<int>> Rings::Open(const SessionPtr& session) {
  absl::StatusOr<std::unique_ptr<SessionRing>> created = SessionRing::Create();
  if (!created.ok()) return created.status();
  std::shared_ptr<SessionRing> ring = *std::move(created);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = session->id();
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ring->command_doorbell(), &event) != 0) {
    const int error = errno;
    const std::string reason = absl::StrCat("epoll add: ", std::strerror(error));
    return error == ENOMEM || error == ENOSPC ? absl::ResourceExhaustedError(reason)
                                              : absl::InternalError(reason);
  }
  {
    absl::MutexLock lock(&mu_);
    opened_[session->id()] = ring;
    sessions_[session->id()] = session;
  }
  ++version_;
  SignalEventfd(wake_fd_);
  return ring->ClientFds();
}

void Rings::Close(uint64_t session_id) {
  {
    absl::MutexLock lock(&mu_);
    auto found = opened_.find(session_id);
    if (found == opened_.end()) return;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, found->second->command_doorbell(), nullptr);
    opened_.erase(found);
    sessions_.erase(session_id);
  }
  // The engine thread drops its reference at its next poll, which closes the fds.
  ++version_;
  SignalEventfd(wake_fd_);
}

void Rings::Refresh() {
  if (version_.load() == served_version_) return;
  absl::MutexLock lock(&mu_);
  served_version_ = version_.load();
  std::erase_if(served_, [&](const auto& entry) { return !opened_.contains(entry.first); });
  for (const auto& [id, ring] : opened_) {
    if (!served_.contains(id)) served_[id] = Served{sessions_.at(id), ring};
  }
}

bool Rings::Poll() {
  Refresh();
  bool work = false;
  for (auto& [id, served] : served_) {
    // What a pass posted and took rings the client's doorbell once, after the pass (a
    // FINISHED that an op ending at once posts during it rings on its own).
    if (Serve(id, served)) {
      served.ring->WakeClient();
      work = true;
    }
  }
  return work;
}

hw::SteadyTime Rings::Sleeping() {
  // Say so before sleeping, then look once more: a client that posts after this rings.
  // A client that made room in its completion ring while the engine was still awake did
  // not ring, so kept completions are looked at again like a parked command.
  Refresh();
  bool retry = false;
  for (auto& [id, served] : served_) served.ring->SetDaemonSleeping(true);
  // Orders those stores before the loads below, as the client's fence orders its post
  // before it reads the flag.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (auto& [id, served] : served_) {
    if (served.broken) continue;
    retry |= !served.parked.empty() || served.ring->Overflowing();
    // A client that consumed while the engine was awake did not ring either: its
    // consumed results are released now rather than at the next wake-up.
    if (served.parked.empty() && !served.ring->Overflowing() &&
        (served.ring->HasCommands() || served.ring->ConsumedMore())) {
      return hw::SteadyTime::InfinitePast();
    }
  }
  return retry ? hw::SteadyNow() + absl::Milliseconds(kRetryMs) : hw::SteadyTime::InfiniteFuture();
}

void Rings::Awake() {
  for (auto& [id, served] : served_) served.ring->SetDaemonSleeping(false);
  epoll_event events[64];
  const int ready = epoll_wait(epoll_fd_, events, 64, 0);
  for (int i = 0; i < ready; ++i) {
    const uint64_t id = events[i].data.u64;
    if (id == kWakeId) {
      ClearEventfd(wake_fd_);
    } else if (auto found = served_.find(id); found != served_.end()) {
      ClearDoorbell(found->second.ring->command_doorbell());
    }
  }
}

bool Rings::Serve(uint64_t session_id, Served& served) {
  SessionRing& ring = *served.ring;
  // The common case on every turn of the engine: nothing to do for this session.
  if (served.broken || (served.parked.empty() && !ring.HasCommands() && !ring.Overflowing() &&
                        !ring.ConsumedMore())) {
    return false;
  }
  SessionPtr session = served.session.lock();
  if (!session) return false;
  bool work = ring.FlushOverflow();
  work |= ServeParked(session, served);
  // A client that does not consume its completions gets no more commands taken.
  size_t taken = 0;
  while (taken < kBatch && served.parked.size() < kMaxParked && !ring.Overflowing()) {
    absl::StatusOr<std::optional<ring::CommandSlot>> command = ring.TakeCommand();
    if (!command.ok()) {
      served.broken = true;
      spdlog::warn("session {}: {}; its command ring is no longer served", session_id,
                   std::string(command.status().message()));
      ring.PostQuietly(
          Refusal(0, absl::Status(command.status().code(),
                                  absl::StrCat(command.status().message(),
                                               "; the command ring is no longer served"))));
      return true;
    }
    if (!command->has_value()) break;
    ++taken;
    const ring::CommandSlot& slot = **command;
    if (slot.kind == static_cast<uint8_t>(ring::CommandKind::kRelease)) {
      const uint32_t count = std::min(slot.after_count, ring::kMaxAfter);
      for (uint32_t i = 0; i < count; ++i) Release(*session, served, slot.after[i]);
      continue;
    }
    if (absl::Status valid = ring::CheckCommand(slot); !valid.ok()) {
      ops_->CountRefused(valid);
      ring.PostQuietly(Refusal(slot.cookie, valid));
      continue;
    }
    OpRequest request = FromCommand(slot);
    if (!served.parked.empty() && !request.wait_for_room) {
      // It may not overtake them, and the quota has no room for it now.
      const absl::Status refused = absl::ResourceExhaustedError(absl::StrCat(
          "tenant '", session->tenant()->name(), "' quota inflight_ops: ", served.parked.size(),
          served.parked.size() == 1 ? " op of this session waits" : " ops of this session wait",
          " for room ahead of this one (which does not wait: wait_for_room)"));
      ops_->CountRefused(refused);
      ring.PostQuietly(Refusal(slot.cookie, refused));
      continue;
    }
    if (!served.parked.empty()) {
      // Checked now, so that a bad op hears what is wrong with it, not of the quota.
      if (absl::Status valid = ops_->Check(session, request); !valid.ok()) {
        ops_->CountRefused(valid);
        ring.PostQuietly(Refusal(slot.cookie, valid));
        continue;
      }
      // Parked with the quota's answer to the op ahead, until its own deadline.
      const hw::SteadyTime now = hw::SteadyNow();
      const hw::SteadyTime deadline = now + ops_->TimeoutOf(request);
      served.parked.push_back(Served::Parked{std::move(request), slot.cookie, now, deadline,
                                             served.parked.front().refused});
      continue;
    }
    if (auto parked = Submit(session, served, std::move(request), slot.cookie, hw::SteadyNow())) {
      served.parked.push_back(*std::move(parked));
    }
  }
  for (uint64_t op_id : ring.TakeConsumed()) Release(*session, served, op_id);
  return work || taken > 0;
}

void Rings::Release(Session& session, Served& served, uint64_t op_id) {
  if (served.parked.empty()) {
    session.ReleaseOp(op_id);
  } else if (session.HoldsResult(op_id)) {
    served.releases.insert(op_id);
  }
}

bool Rings::ServeParked(const SessionPtr& session, Served& served) {
  if (served.parked.empty()) return false;
  bool answered = false;
  const hw::SteadyTime now = hw::SteadyNow();
  for (auto it = served.parked.begin(); it != served.parked.end();) {
    if (now < it->deadline) {
      ++it;
      continue;
    }
    // Refused as the Submit RPC refuses after waiting: with the quota's last answer.
    ops_->CountRefused(it->refused);
    served.ring->PostQuietly(Refusal(it->cookie, it->refused));
    it = served.parked.erase(it);
    answered = true;
  }
  while (!served.parked.empty() && HasInflightRoom(*session->tenant())) {
    Served::Parked front = std::move(served.parked.front());
    served.parked.pop_front();
    if (auto again =
            Submit(session, served, std::move(front.request), front.cookie, front.submitted)) {
      served.parked.push_front(*std::move(again));
      break;
    }
    answered = true;
  }
  if (served.parked.empty()) {
    for (uint64_t op_id : served.releases) session->ReleaseOp(op_id);
    served.releases.clear();
  }
  return answered;
}

std::optional<Rings::Served::Parked> Rings::Submit(const SessionPtr& session, Served& served,
                                                   OpRequest request, uint64_t cookie,
                                                   hw::SteadyTime submitted) {
  SessionRing& ring = *served.ring;
  // The engine thread never waits for room: a command that would is parked and retried.
  const bool wait_for_room = request.wait_for_room;
  const hw::SteadyTime deadline = submitted + ops_->TimeoutOf(request);
  // The request is kept for a retry only where it may be parked.
  OpRequest attempt = wait_for_room ? request : std::move(request);
  attempt.wait_for_room = false;
  if (wait_for_room) {
    // Time spent parked counts toward the op's deadline.
    const absl::Duration left = std::max(deadline - hw::SteadyNow(), absl::Milliseconds(1));
    attempt.timeout_ms =
        static_cast<uint32_t>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))));
  }
  OpDone done = [weak = std::weak_ptr<SessionRing>(served.ring), cookie](uint64_t op_id,
                                                                         const OpResult& result) {
    if (std::shared_ptr<SessionRing> ring = weak.lock()) {
      ring->Post(ToCompletion(cookie, op_id, result));
    }
  };
  absl::StatusOr<Accepted> accepted = ops_->Submit(session, std::move(attempt), std::move(done));
  if (accepted.ok()) {
    ring::CompletionSlot slot{};
    slot.cookie = cookie;
    slot.op_id = accepted->op_id;
    slot.kind = static_cast<uint32_t>(ring::CompletionKind::kAccepted);
    slot.timeout_ms = accepted->timeout_ms;
    ring.PostQuietly(slot);
    return std::nullopt;
  }
  if (wait_for_room && accepted.status().GetPayload(kRetryAfterMs) && hw::SteadyNow() < deadline) {
    return Served::Parked{std::move(request), cookie, submitted, deadline, accepted.status()};
  }
  ops_->CountRefused(accepted.status());
  ring.PostQuietly(Refusal(cookie, accepted.status()));
  return std::nullopt;
}

}  // namespace cclo::daemon
