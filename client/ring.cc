#include "client/ring.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cclo::client {
namespace {

/// How long a waiter spins on the ring before it sleeps on the doorbell.
constexpr absl::Duration kSpin = absl::Microseconds(5);

void SignalEventfd(int eventfd) {
  const uint64_t one = 1;
  (void)!write(eventfd, &one, sizeof(one));
}

/// Forks this process descends from since libcclo first made a gRPC channel (or mapped a
/// ring), counted in each child: every op asks whether it runs where its session was
/// attached, and getpid is a system call (glibc does not cache it), about a microsecond on a
/// paravirtualised core.
std::atomic<uint64_t> forks{0};

uint64_t ForksSoFar() {
  static std::once_flag counting;
  std::call_once(counting, [] {
    pthread_atfork(nullptr, nullptr, [] { forks.fetch_add(1, std::memory_order_relaxed); });
  });
  return forks.load(std::memory_order_relaxed);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClientRing>> ClientRing::Map(int memfd, uint64_t bytes,
                                                            int command_doorbell,
                                                            int completion_doorbell, AliveFn alive,
                                                            absl::Duration alive_check) {
  auto fail = [&](absl::Status status) -> absl::Status {
    close(memfd);
    close(command_doorbell);
    close(completion_doorbell);
    return status;
  };
  struct stat info {};
  if (bytes != ring::kRingBytes || fstat(memfd, &info) != 0 ||
      static_cast<uint64_t>(info.st_size) != ring::kRingBytes) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("cclod's rings are ", bytes, " bytes (memfd ", info.st_size,
                     "); this libcclo expects ", ring::kRingBytes, ": versions differ")));
  }
  void* base = mmap(nullptr, ring::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (base == MAP_FAILED) {
    return fail(absl::InternalError(absl::StrCat("mmap of the rings: ", std::strerror(errno))));
  }
  const ring::RingHeader* header = ring::Header(base);
  if (header->magic != ring::kMagic || header->version != ring::kVersion ||
      header->command_slots != ring::kCommandSlots ||
      header->completion_slots != ring::kCompletionSlots) {
    // Said before the unmap: the header lies in the mapping.
    absl::Status other = absl::FailedPreconditionError(
        absl::StrCat("cclod's rings have magic 0x", absl::Hex(header->magic), ", version ",
                     header->version, "; this libcclo speaks version ", ring::kVersion));
    munmap(base, ring::kRingBytes);
    return fail(std::move(other));
  }
  return std::unique_ptr<ClientRing>(new ClientRing(
      memfd, base, command_doorbell, completion_doorbell, std::move(alive), alive_check));
}

ClientRing::ClientRing(int memfd, void* base, int command_doorbell, int completion_doorbell,
                       AliveFn alive, absl::Duration alive_check)
    : attaching_process_(getpid()),
      attaching_forks_(ForksSoFar()),
      memfd_(memfd),
      base_(base),
      header_(ring::Header(base)),
      command_doorbell_(command_doorbell),
      completion_doorbell_(completion_doorbell),
      self_doorbell_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      alive_(std::move(alive)),
      alive_check_(alive_check) {}

ClientRing::~ClientRing() {
  munmap(base_, ring::kRingBytes);
  close(memfd_);
  close(command_doorbell_);
  close(completion_doorbell_);
  if (self_doorbell_ >= 0) close(self_doorbell_);
}

void ClientRing::WakeDaemon() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header_->daemon_sleeping.load(std::memory_order_relaxed) != 0) {
    SignalEventfd(command_doorbell_);
  }
}

void ClientRing::ConsumeLocked() {
  if (!broken_.ok()) return;
  const uint64_t head = header_->completion_head.load(std::memory_order_acquire);
  if (head == completion_tail_) return;
  if (head < completion_tail_ || head - completion_tail_ > ring::kCompletionSlots) {
    broken_ =
        absl::InternalError(absl::StrCat("completion ring head ", head, " is outside [",
                                         completion_tail_, ", +", ring::kCompletionSlots, "]"));
    return;
  }
  const ring::CompletionSlot* slots = ring::Completions(base_);
  for (; completion_tail_ < head; ++completion_tail_) {
    const ring::CompletionSlot slot = slots[completion_tail_ % ring::kCompletionSlots];
    const bool forgotten = forgotten_.contains(slot.cookie);
    switch (static_cast<ring::CompletionKind>(slot.kind)) {
      case ring::CompletionKind::kAccepted:
        if (!forgotten) {
          answers_.emplace(slot.cookie,
                           Accepted{slot.op_id, static_cast<uint32_t>(slot.timeout_ms)});
        }
        break;
      case ring::CompletionKind::kRejected: {
        absl::Status refused(static_cast<absl::StatusCode>(slot.code),
                             ring::GetText(slot.message, ring::kMessageBytes));
        if (slot.cookie == 0) {
          broken_ = refused;  // the daemon no longer serves this ring
        } else if (forgotten) {
          forgotten_.erase(slot.cookie);
        } else {
          answers_.emplace(slot.cookie, refused);
        }
        break;
      }
      case ring::CompletionKind::kFinished:
        if (forgotten) {
          forgotten_.erase(slot.cookie);
          if (slot.code != 0) to_release_.push_back(slot.op_id);
        } else {
          finished_.emplace(slot.cookie, slot);
        }
        break;
    }
  }
  header_->completion_tail.store(completion_tail_, std::memory_order_release);
  last_news_ = hw::SteadyNow();
  ++consumed_;  // news for the threads waiting behind the doorbell's sleeper
  // What this consumed may be what the doorbell's sleeper waits for.
  if (doorbell_sleeper_ && self_doorbell_ >= 0) SignalEventfd(self_doorbell_);
  ReleaseLocked();
  // The daemon releases consumed results and posts what did not fit when it runs.
  WakeDaemon();
}

bool ClientRing::RoomLocked() const {
  const uint64_t taken = header_->command_tail.load(std::memory_order_acquire);
  return taken <= command_head_ && command_head_ - taken < ring::kCommandSlots;
}

void ClientRing::PostLocked(const ring::CommandSlot& slot) {
  ring::Commands(base_)[command_head_ % ring::kCommandSlots] = slot;
  ++command_head_;
  header_->command_head.store(command_head_, std::memory_order_release);
}

void ClientRing::ReleaseLocked() {
  bool posted = false;
  while (!to_release_.empty() && RoomLocked()) {
    const size_t count = std::min<size_t>(to_release_.size(), ring::kMaxAfter);
    PostLocked(ring::EncodeRelease({to_release_.end() - count, to_release_.end()}));
    to_release_.resize(to_release_.size() - count);
    posted = true;
  }
  if (posted) WakeDaemon();
}

std::optional<absl::Status> ClientRing::Sleep(absl::FunctionRef<bool()> ready,
                                              hw::SteadyTime deadline) {
  const absl::Duration nap =
      std::max(std::min(deadline - hw::SteadyNow(), alive_check_), absl::ZeroDuration());
  {
    absl::MutexLock lock(&mu_);
    ConsumeLocked();
    if (ready()) return absl::OkStatus();
    if (!broken_.ok()) return broken_;
    if (doorbell_sleeper_) {
      // Another thread sleeps on the doorbell and consumes what it brings: wait for that,
      // or for its place.
      const uint64_t seen = consumed_;
      auto news = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return consumed_ != seen || !doorbell_sleeper_ || !broken_.ok();
      };
      mu_.AwaitWithTimeout(absl::Condition(&news), nap);
      return std::nullopt;
    }
    doorbell_sleeper_ = true;
  }
  const timespec timeout = absl::ToTimespec(nap);
  pollfd doorbells[] = {{completion_doorbell_, POLLIN, 0}, {self_doorbell_, POLLIN, 0}};
  bool rung = false;
  if (ppoll(doorbells, std::size(doorbells), &timeout, nullptr) > 0) {
    // Each ring of the daemon is a byte in its pipe; rings that piled up are news once. The
    // pipe's end of file (the daemon closed its end with the session) is no ring: the
    // liveness check below says what happened.
    char rings[256];
    rung = doorbells[0].revents != 0 && read(completion_doorbell_, rings, sizeof(rings)) > 0;
    uint64_t count;
    rung |= doorbells[1].revents != 0 && read(self_doorbell_, &count, sizeof(count)) > 0;
  }
  {
    absl::MutexLock lock(&mu_);
    doorbell_sleeper_ = false;
    ConsumeLocked();  // what rang is news for the threads waiting behind this one
    // A result that came with the daemon's end is still this caller's result.
    if (ready()) return absl::OkStatus();
  }
  if (rung) return std::nullopt;
  if (absl::Status alive = alive_(); !alive.ok()) return alive;
  return std::nullopt;
}

absl::Status ClientRing::AliveNow() {
  const int64_t now = absl::ToInt64Nanoseconds(hw::SteadyNow() - hw::SteadyTime());
  int64_t last = last_alive_check_ns_.load(std::memory_order_relaxed);
  if (now - last < absl::ToInt64Nanoseconds(alive_check_) ||
      !last_alive_check_ns_.compare_exchange_strong(last, now)) {
    return absl::OkStatus();
  }
  return alive_();
}

absl::Status ClientRing::Await(absl::FunctionRef<bool()> ready, hw::SteadyTime deadline) {
  while (true) {
    const hw::SteadyTime spin_until = std::min(hw::SteadyNow() + kSpin, deadline);
    do {
      {
        absl::MutexLock lock(&mu_);
        ConsumeLocked();
        if (ready()) return absl::OkStatus();
        if (!broken_.ok()) return broken_;
      }
      // Gives way to whatever else wants this core: often the daemon's engine thread.
      sched_yield();
    } while (hw::SteadyNow() < spin_until);
    if (hw::SteadyNow() >= deadline) {
      // A caller that only looks (its deadline already past) learns of a daemon gone too.
      if (absl::Status alive = AliveNow(); !alive.ok()) return alive;
      return absl::DeadlineExceededError("deadline passed");
    }
    // Say so before sleeping, then look once more: the daemon rings after this.
    header_->client_waiters.fetch_add(1, std::memory_order_seq_cst);
    // Orders that before the look at the completion head, as the daemon's fence orders
    // its post before it reads client_waiters.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::optional<absl::Status> ended = Sleep(ready, deadline);
    header_->client_waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (ended) return *ended;
  }
}

absl::Status ClientRing::InAttachingProcess() const {
  if (forks.load(std::memory_order_relaxed) == attaching_forks_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("this libcclo session was attached by process ",
                                                    attaching_process_, "; process ", getpid(),
                                                    " is a forked child, which cannot use it"));
}

void ClientRing::CountForks() { (void)ForksSoFar(); }

absl::Status ClientRing::NoForkSinceAttach() {
  if (forks.load(std::memory_order_relaxed) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "process ", getpid(),
      " was forked from a process in which libcclo attached, and gRPC, which the session's "
      "calls go through, does not work after a fork (the child's calls would go out on the "
      "parent's connection to cclod and never reach their deadline); attach from a program "
      "the child execs"));
}

absl::Status ClientRing::CheckOpen() const {
  if (absl::Status here = InAttachingProcess(); !here.ok()) return here;
  if (closed_.load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError("the session is closed");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<uint64_t, ClientRing::Accepted>> ClientRing::Submit(
    v1::SubmitRequest request, const std::vector<Dependency>& after, hw::SteadyTime deadline) {
  if (absl::Status open = CheckOpen(); !open.ok()) return open;
  // Refused before waiting for room (the dependencies left out below only shorten the list).
  if (absl::Status fits = ring::CheckFits(request, after.size()); !fits.ok()) return fits;
  uint64_t cookie = 0;
  absl::Status posted;
  // Dependencies are checked and the command posted under one hold of mu_, in which no
  // completion is consumed: the daemon still holds every result this leaves in `after`.
  auto post = [&] {
    if (!RoomLocked()) return false;
    request.clear_after();
    for (const Dependency& dependency : after) {
      // An OK result this process has is left out; the daemon still holds a failed one
      // (until released) and ends this op ABORTED for it, as the Submit RPC would.
      auto done = finished_.find(dependency.cookie);
      if (done == finished_.end() || done->second.code != 0) {
        // One collected (by another thread's Wait since the caller looked) is known here: the
        // daemon forgot it if OK and is releasing it if failed.
        if (auto collected = collected_.find(dependency.cookie); collected != collected_.end()) {
          if (collected->second.code == 0) continue;
          posted = absl::AbortedError(absl::StrCat(
              "op ", dependency.op_id, " that this op waits for failed: ",
              absl::StatusCodeToString(static_cast<absl::StatusCode>(collected->second.code)), ": ",
              ring::GetText(collected->second.message, ring::kMessageBytes)));
          return true;
        }
        request.add_after(dependency.op_id);
      }
    }
    cookie = next_cookie_++;
    ring::CommandSlot slot;
    posted = ring::EncodeCommand(request, cookie, slot);
    if (posted.ok()) PostLocked(slot);
    return true;
  };
  absl::Status room = Await(post, deadline);
  if (!room.ok()) {
    return absl::Status(room.code(), absl::StrCat("posting to the command ring: ", room.message()));
  }
  if (!posted.ok()) return posted;
  WakeDaemon();
  std::optional<absl::StatusOr<Accepted>> answer;
  absl::Status waited = Await(
      [&] {
        auto found = answers_.find(cookie);
        if (found == answers_.end()) return false;
        answer = std::move(found->second);
        answers_.erase(found);
        return true;
      },
      deadline);
  if (!waited.ok()) {
    Forget(cookie);
    return absl::Status(waited.code(),
                        absl::StrCat("waiting for cclod to take the op: ", waited.message()));
  }
  if (!answer->ok()) return answer->status();
  return std::make_pair(cookie, **answer);
}

absl::StatusOr<std::optional<ring::CompletionSlot>> ClientRing::Finished(uint64_t cookie,
                                                                         hw::SteadyTime deadline) {
  if (absl::Status here = InAttachingProcess(); !here.ok()) return here;
  std::optional<ring::CompletionSlot> result;
  absl::Status waited = Await(
      [&] {
        if (auto collected = collected_.find(cookie); collected != collected_.end()) {
          result = collected->second;  // another waiter of this cookie took it first
          return true;
        }
        auto found = finished_.find(cookie);
        if (found == finished_.end()) return false;
        result = found->second;
        if (result->code != 0) to_release_.push_back(result->op_id);
        collected_.emplace(cookie, found->second);
        finished_.erase(found);
        ReleaseLocked();
        return true;
      },
      deadline);
  if (waited.code() == absl::StatusCode::kDeadlineExceeded) return result;
  if (!waited.ok()) return waited;
  return result;
}

hw::SteadyTime ClientRing::HeldUntil(absl::Duration grace) {
  // The parent's ring, and maybe a lock held at fork.
  if (!InAttachingProcess().ok()) return hw::SteadyTime::InfinitePast();
  absl::MutexLock lock(&mu_);
  const uint64_t held = header_->completions_held.load(std::memory_order_acquire);
  ConsumeLocked();
  return held == 0 ? hw::SteadyTime::InfinitePast() : last_news_ + grace;
}

void ClientRing::Forget(uint64_t cookie) {
  if (!InAttachingProcess().ok()) return;  // the parent's ring, and maybe a lock held at fork
  absl::MutexLock lock(&mu_);
  answers_.erase(cookie);
  if (collected_.erase(cookie) > 0) return;  // released when it was collected
  auto found = finished_.find(cookie);
  if (found == finished_.end()) {
    forgotten_.insert(cookie);
    return;
  }
  if (found->second.code != 0) to_release_.push_back(found->second.op_id);
  finished_.erase(found);
  ReleaseLocked();
}

}  // namespace cclo::client
