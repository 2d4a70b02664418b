#include "daemon/session_ring.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace cclo::daemon {

absl::StatusOr<std::unique_ptr<SessionRing>> SessionRing::Create() {
  int memfd = memfd_create("cclo-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  int command_doorbell = -1;
  int completion_doorbell[2] = {-1, -1};
  auto fail = [&](const char* what) -> absl::Status {
    absl::Status status =
        absl::ResourceExhaustedError(absl::StrCat("rings: ", what, ": ", std::strerror(errno)));
    close(memfd);
    for (int fd : {command_doorbell, completion_doorbell[0], completion_doorbell[1]}) {
      if (fd >= 0) close(fd);
    }
    return status;
  };
  if (ftruncate(memfd, ring::kRingBytes) != 0) return fail("ftruncate");
  if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return fail("seal");
  }
  command_doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (command_doorbell < 0) return fail("eventfd");
  // A pipe, not an eventfd: the client gets only its read end, so it can neither fill it
  // nor make the daemon's end block (an fd's O_NONBLOCK belongs to the open file, which an
  // eventfd's holders all share).
  if (pipe2(completion_doorbell, O_CLOEXEC | O_NONBLOCK) != 0) return fail("pipe");
  void* base = mmap(nullptr, ring::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (base == MAP_FAILED) return fail("mmap");
  ring::RingHeader* header = new (base) ring::RingHeader();
  header->magic = ring::kMagic;
  header->version = ring::kVersion;
  header->command_slots = ring::kCommandSlots;
  header->completion_slots = ring::kCompletionSlots;
  return std::unique_ptr<SessionRing>(new SessionRing(
      memfd, base, command_doorbell, completion_doorbell[0], completion_doorbell[1]));
}

SessionRing::SessionRing(int memfd, void* base, int command_doorbell, int completion_doorbell,
                         int completion_doorbell_writer)
    : memfd_(memfd),
      base_(base),
      header_(ring::Header(base)),
      command_doorbell_(command_doorbell),
      completion_doorbell_(completion_doorbell),
      completion_doorbell_writer_(completion_doorbell_writer) {}

SessionRing::~SessionRing() {
  munmap(base_, ring::kRingBytes);
  close(memfd_);
  close(command_doorbell_);
  close(completion_doorbell_);
  close(completion_doorbell_writer_);
}

bool SessionRing::PostLocked(const ring::CompletionSlot& slot) {
  const uint64_t tail = header_->completion_tail.load(std::memory_order_acquire);
  if (tail > completion_head_ || completion_head_ - tail >= ring::kCompletionSlots) return false;
  ring::Completions(base_)[completion_head_ % ring::kCompletionSlots] = slot;
  // A failed op's result stays until the client releases it (ring.h).
  if (slot.kind == static_cast<uint32_t>(ring::CompletionKind::kFinished) && slot.code == 0) {
    finished_.emplace_back(completion_head_, slot.op_id);
  }
  ++completion_head_;
  header_->completion_head.store(completion_head_, std::memory_order_release);
  return true;
}

void SessionRing::Post(const ring::CompletionSlot& slot) {
  if (PostQuietly(slot)) WakeClient();
}

bool SessionRing::PostQuietly(const ring::CompletionSlot& slot) {
  absl::MutexLock lock(&mu_);
  if (!overflow_.empty() || !PostLocked(slot)) {
    overflow_.push_back(slot);
    CountHeldLocked();
    return false;
  }
  return true;
}

bool SessionRing::FlushOverflow() {
  bool posted = false;
  absl::MutexLock lock(&mu_);
  // Asked on every pass: completions_held shares the line the client spins on.
  if (overflow_.empty()) return false;
  while (!overflow_.empty() && PostLocked(overflow_.front())) {
    overflow_.pop_front();
    posted = true;
  }
  if (posted) CountHeldLocked();  // unchanged otherwise
  return posted;
}

void SessionRing::CountHeldLocked() {
  overflowing_.store(!overflow_.empty(), std::memory_order_release);
  // After the posts above (their head's release store): a client that reads 0 here finds
  // them in the ring.
  header_->completions_held.store(overflow_.size(), std::memory_order_release);
}

bool SessionRing::Overflowing() const { return overflowing_.load(std::memory_order_acquire); }

absl::StatusOr<std::optional<ring::CommandSlot>> SessionRing::TakeCommand() {
  // The completion tail first: what the client consumed before it posted these commands.
  const uint64_t consumed = header_->completion_tail.load(std::memory_order_acquire);
  const uint64_t head = header_->command_head.load(std::memory_order_acquire);
  if (head < command_tail_ || head - command_tail_ > ring::kCommandSlots) {
    return absl::InvalidArgumentError(absl::StrCat("command ring head ", head, " is outside [",
                                                   command_tail_, ", ", command_tail_, " + ",
                                                   ring::kCommandSlots, "]"));
  }
  if (!consumed_snapshot_) consumed_snapshot_.emplace(consumed, head);
  if (head == command_tail_) return std::nullopt;
  ring::CommandSlot command;
  std::memcpy(&command, &ring::Commands(base_)[command_tail_ % ring::kCommandSlots],
              sizeof(ring::CommandSlot));
  ++command_tail_;
  header_->command_tail.store(command_tail_, std::memory_order_release);
  return command;
}

absl::Span<const uint64_t> SessionRing::TakeConsumed() {
  consumed_ids_.clear();
  if (!consumed_snapshot_ || command_tail_ < consumed_snapshot_->second) return consumed_ids_;
  const uint64_t consumed = consumed_snapshot_->first;
  consumed_snapshot_.reset();
  released_tail_ = consumed;
  absl::MutexLock lock(&mu_);
  if (consumed > completion_head_) return consumed_ids_;  // a scribbled tail releases nothing
  while (!finished_.empty() && finished_.front().first < consumed) {
    consumed_ids_.push_back(finished_.front().second);
    finished_.pop_front();
  }
  return consumed_ids_;
}

void SessionRing::WakeClient() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header_->client_waiters.load(std::memory_order_relaxed) == 0) return;
  // Never blocks: this end is the daemon's alone, and non-blocking. A full pipe (the client
  // does not read) already says that there is news.
  const char ring = 1;
  (void)!write(completion_doorbell_writer_, &ring, sizeof(ring));
}

void SessionRing::SetDaemonSleeping(bool sleeping) {
  header_->daemon_sleeping.store(sleeping ? 1 : 0, std::memory_order_seq_cst);
}

bool SessionRing::ConsumedMore() const {
  return header_->completion_tail.load(std::memory_order_acquire) != released_tail_;
}

bool SessionRing::HasCommands() const {
  return header_->command_head.load(std::memory_order_acquire) != command_tail_;
}

}  // namespace cclo::daemon
