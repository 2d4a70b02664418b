#include "hw/emu/scratch_pool.h"

#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace cclo::hw::emu {

absl::StatusOr<ScratchPool::Buffer> ScratchPool::Take(uint64_t bytes) {
  const uint64_t used = used_bytes_.load();  // never above the limit: see `room`
  const uint64_t room = limit_bytes_ - used;
  if (bytes > room) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the engine's scratch in use would exceed scratch_max_bytes = ", limit_bytes_,
                     " (", used, " bytes in use by other calls)"));
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
  return buffer;
}

void ScratchPool::Give(Buffer buffer) {
  if (buffer.data == nullptr) return;
  used_bytes_.fetch_sub(buffer.bytes);
  if (buffer.bytes < kMinKeptBytes || buffer.bytes > keep_bytes_) return;
  while (kept_bytes_.load() + buffer.bytes > keep_bytes_) {
    kept_bytes_.fetch_sub(kept_.front().bytes);
    kept_.pop_front();
  }
  kept_bytes_.fetch_add(buffer.bytes);
  kept_.push_back(std::move(buffer));
}

}  // namespace cclo::hw::emu
