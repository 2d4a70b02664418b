// The RBM's pool buffers and the credit accounts of peer links (eager credits, and the
// rendezvous requests waiting for their receives). Invariant: the free buffers are at
// least `promised_`, the sum over open accounts of reserved - staged, so every credit an
// account has out can be staged; local eager staging takes only buffers beyond that, and
// only once no account is short of the buffers it wants (TopUp).
// Cost: O(1) per buffer or credit; TakeCredits is O(accounts with credits to return).
#include <algorithm>

#include "hw/emu/rbm.h"

namespace cclo::hw::emu {

uint32_t Rbm::Allocate() {
  if (free_.empty()) return kNoBuffer;
  const uint32_t buffer = free_.back();
  free_.pop_back();
  const uint64_t used = used_bytes_.fetch_add(buffer_bytes_) + buffer_bytes_;
  if (used > peak_bytes_.load()) peak_bytes_.store(used);
  return buffer;
}

void Rbm::Free(uint32_t buffer) {
  if (buffer == kNoBuffer) return;
  free_.push_back(buffer);
  used_bytes_.fetch_sub(buffer_bytes_);
}

void Rbm::Release(uint64_t account, uint32_t buffer, bool credit) {
  Free(buffer);
  auto it = accounts_.find(account);
  if (it != accounts_.end() && buffer != kNoBuffer) {
    --it->second.staged;
    ++promised_;
  }
  TopUp();
  if (it == accounts_.end() || !credit) return;  // local, or the account closed meanwhile
  // Credits go back in batches of half the account's (rounded down, at least one), so most
  // eager messages cost no credit segment of their own; at once while the peer holds fewer
  // than a batch (a burst, or credits spent on messages whose receives never come).
  Account& held = it->second;
  const uint32_t batch = std::max<uint32_t>(1, held.reserved / 2);
  ++held.returnable;
  if (!held.queued && (held.returnable >= batch || held.granted < batch)) {
    held.queued = true;
    returning_.push_back(account);
  }
}

void Rbm::TopUp() {
  while (!short_.empty() && free_.size() > promised_) {
    const uint64_t account = short_.front();
    Account& held = accounts_.at(account);
    ++held.reserved;
    ++held.returnable;
    ++promised_;
    reserved_bytes_.fetch_add(buffer_bytes_);
    if (!held.queued) {
      held.queued = true;
      returning_.push_back(account);
    }
    if (held.reserved == held.wanted) short_.erase(short_.begin());
  }
}

void Rbm::StopWaiting(uint64_t account) {
  auto it = accounts_.find(account);
  if (it != accounts_.end()) --it->second.waiting;
}

Rbm::Grant Rbm::OpenAccount(uint32_t credits) {
  const uint64_t unclaimed = free_.size() - promised_;
  const uint32_t reserved = static_cast<uint32_t>(std::min<uint64_t>(credits, unclaimed));
  const uint64_t account = next_account_++;
  accounts_[account] = {.wanted = credits, .reserved = reserved, .granted = reserved};
  if (reserved < credits) short_.push_back(account);
  promised_ += reserved;
  reserved_bytes_.fetch_add(reserved * buffer_bytes_);
  return {account, reserved};
}

void Rbm::CloseAccount(uint64_t account) {
  auto it = accounts_.find(account);
  if (it == accounts_.end()) return;
  promised_ -= it->second.reserved - it->second.staged;
  reserved_bytes_.fetch_sub(it->second.reserved * buffer_bytes_);
  accounts_.erase(it);
  std::erase(short_, account);
  TopUp();
}

std::vector<std::pair<uint64_t, uint32_t>> Rbm::TakeCredits() {
  std::vector<std::pair<uint64_t, uint32_t>> credits;
  for (uint64_t account : std::exchange(returning_, {})) {
    auto it = accounts_.find(account);
    if (it == accounts_.end()) continue;
    it->second.queued = false;
    it->second.granted += it->second.returnable;
    credits.push_back({account, std::exchange(it->second.returnable, 0)});
  }
  return credits;
}

}  // namespace cclo::hw::emu
