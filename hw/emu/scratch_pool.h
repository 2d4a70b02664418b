// The scratch memory of calls (Slot::kScratch), kept when a call is done for the calls
// after it. Memory fresh from the kernel costs a page fault per 4 KiB page when first
// touched, and glibc maps every allocation of 32 MiB or more (past its largest mmap
// threshold) anew and unmaps it on free: a call that allocated such a scratch faulted all
// of it in again (a reduce all_to_one or reduce_scatter ring of 32 MiB: 8192 faults, on
// the paravirtualised 2-core VM about 150 ms, many times what moving the data costs).
//
// The buffers handed out and not yet given back hold at most limit_bytes in all: Take
// refuses a buffer beyond it, so the calls' scratch, which tenants' quotas do not count
// and which some algorithms need more of than their buffers (a reduce all_to_one root:
// (P-2)·n), cannot take the daemon's memory. Each tenant's buffers may also be held to a
// limit of its own (SetTenantLimits), so that one tenant's calls cannot hold all of it.
//
// Given back, a buffer of at least kMinKeptBytes is kept, up to keep_bytes in all (the
// least recently given back go first to make room); smaller ones (malloc recycles those
// itself) and ones bigger than keep_bytes are freed. Take hands out the smallest kept
// buffer that holds the request and is at most twice its size, else allocates a new one,
// freeing the least recently given back first where the buffers handed out and kept would
// hold more than limit_bytes: the pool's memory in all stays within it.
//
// A kept buffer holds what its last call left there, as memory recycled by malloc does:
// programs write their scratch before they read it (the firmware verifier runs them on
// poisoned scratch), and scratch reaches a client only through the program's moves.
//
// Not thread-safe (the engine thread's), but the counts may be read from any thread. Cost:
// O(kept buffers) per Take and Give, at most keep_bytes / kMinKeptBytes of them, and a lock
// the readers of the tenants' counts share.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "hw/device.h"

namespace cclo::hw::emu {

class ScratchPool {
 public:
  /// Scratch memory of one call; its contents are unspecified.
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    uint64_t bytes = 0;   ///< its size: at least what was asked for
    uint32_t tenant = 0;  ///< whose call holds it
  };

  /// Smaller buffers are freed when given back.
  static constexpr uint64_t kMinKeptBytes = 1ull << 20;
  /// What the engine keeps by default.
  static constexpr uint64_t kDefaultKeepBytes = 256ull << 20;
  /// What the engine hands out at most by default.
  static constexpr uint64_t kDefaultLimitBytes = 4ull << 30;

  /// Hands out at most `limit_bytes` at once and holds at most that, kept buffers
  /// included; keeps at most `keep_bytes` of buffers given back.
  explicit ScratchPool(uint64_t limit_bytes = kDefaultLimitBytes,
                       uint64_t keep_bytes = kDefaultKeepBytes)
      : limit_bytes_(limit_bytes), keep_bytes_(keep_bytes) {}

  /// A buffer of at least `bytes` for a call of `tenant`: a kept one if one fits, else a
  /// new one. RESOURCE_EXHAUSTED, saying why, when the buffers handed out (or those of the
  /// tenant) would then hold more than the limit (or the tenant's), or when the memory
  /// cannot be allocated.
  absl::StatusOr<Buffer> Take(uint64_t bytes, uint32_t tenant);

  /// Gives back a buffer nothing reads or writes any more (an empty one is ignored).
  void Give(Buffer buffer);

  /// Tenant index -> the most its buffers handed out may hold, from the next Take on;
  /// tenants not listed have only the pool's limit. What tenants hold stays held.
  void SetTenantLimits(std::map<uint32_t, uint64_t> limits);

  uint64_t limit_bytes() const { return limit_bytes_; }
  /// Thread-safe: bytes of the buffers handed out and not yet given back.
  uint64_t used_bytes() const { return used_bytes_.load(); }
  /// Thread-safe: bytes of the buffers kept for reuse.
  uint64_t kept_bytes() const { return kept_bytes_.load(); }
  /// Thread-safe: buffers Take allocated because none kept fitted.
  uint64_t allocations() const { return allocations_.load(); }
  /// Thread-safe: what each tenant that took scratch holds, and its refusals.
  std::map<uint32_t, TenantScratch> tenants() const;

 private:
  const uint64_t limit_bytes_;
  const uint64_t keep_bytes_;
  std::deque<Buffer> kept_;  ///< least recently given back first
  std::atomic<uint64_t> used_bytes_{0};
  std::atomic<uint64_t> kept_bytes_{0};
  std::atomic<uint64_t> allocations_{0};
  std::map<uint32_t, uint64_t> tenant_limits_;
  mutable absl::Mutex tenants_mu_;
  std::map<uint32_t, TenantScratch> tenants_ ABSL_GUARDED_BY(tenants_mu_);
};

}  // namespace cclo::hw::emu
