#include "hw/emu/scratch_pool.h"

#include <algorithm>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cclo::hw::emu {

absl::StatusOr<ScratchPool::Buffer> ScratchPool::Take(uint64_t bytes, uint32_t tenant) {
  const uint64_t used = used_bytes_.load();  // never above the limit: see `room`
  uint64_t room = limit_bytes_ - used;
  if (bytes > room) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the engine's scratch in use would exceed scratch_max_bytes = ", limit_bytes_,
                     " (", used, " bytes in use by other calls)"));
  }
  if (auto limit = tenant_limits_.find(tenant); limit != tenant_limits_.end()) {
    absl::MutexLock lock(&tenants_mu_);
    TenantScratch& use = tenants_[tenant];
    // A reload may have lowered the limit below what the tenant holds.
    const uint64_t tenant_room = limit->second - std::min(use.used_bytes, limit->second);
    if (bytes > tenant_room) {
      ++use.refusals;
      return absl::ResourceExhaustedError(absl::StrCat(
          "this tenant's scratch in use would exceed its scratch_bytes quota = ", limit->second,
          " (", use.used_bytes, " bytes in use by its other calls)"));
    }
    room = std::min(room, tenant_room);
  }
  // A kept buffer may be up to twice the request: only one within the room will do.
  auto best = kept_.end();
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->bytes >= bytes && it->bytes / 2 <= bytes && it->bytes <= room &&
        (best == kept_.end() || it->bytes < best->bytes)) {
      best = it;
    }
  }
  Buffer buffer;
  if (best == kept_.end()) {
    // The kept buffers count against the limit too: the least recently given back make room.
    while (!kept_.empty() && used + kept_bytes_.load() + bytes > limit_bytes_) {
      kept_bytes_.fetch_sub(kept_.front().bytes);
      kept_.pop_front();
    }
    // No exception on the data path: memory that cannot be had is the caller's error to
    // report, not the daemon's end.
    buffer.data.reset(new (std::nothrow) std::byte[bytes]);
    if (buffer.data == nullptr) {
      return absl::ResourceExhaustedError("the engine cannot allocate that much memory");
    }
    buffer.bytes = bytes;
    allocations_.fetch_add(1);
  } else {
    buffer = std::move(*best);
    kept_.erase(best);
    kept_bytes_.fetch_sub(buffer.bytes);
  }
  used_bytes_.fetch_add(buffer.bytes);
  buffer.tenant = tenant;
  absl::MutexLock lock(&tenants_mu_);
  tenants_[tenant].used_bytes += buffer.bytes;
  return buffer;
}

void ScratchPool::Give(Buffer buffer) {
  if (buffer.data == nullptr) return;
  used_bytes_.fetch_sub(buffer.bytes);
  {
    absl::MutexLock lock(&tenants_mu_);
    tenants_[buffer.tenant].used_bytes -= buffer.bytes;
  }
  if (buffer.bytes < kMinKeptBytes || buffer.bytes > keep_bytes_) return;
  while (kept_bytes_.load() + buffer.bytes > keep_bytes_) {
    kept_bytes_.fetch_sub(kept_.front().bytes);
    kept_.pop_front();
  }
  kept_bytes_.fetch_add(buffer.bytes);
  kept_.push_back(std::move(buffer));
}

void ScratchPool::SetTenantLimits(std::map<uint32_t, uint64_t> limits) {
  tenant_limits_ = std::move(limits);
}

std::map<uint32_t, TenantScratch> ScratchPool::tenants() const {
  absl::MutexLock lock(&tenants_mu_);
  return tenants_;
}

}  // namespace cclo::hw::emu
