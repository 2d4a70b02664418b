#include "hw/emu/scratch_pool.h"

#include <new>
#include <utility>

namespace cclo::hw::emu {

ScratchPool::Buffer ScratchPool::Take(uint64_t bytes) {
  auto best = kept_.end();
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->bytes >= bytes && it->bytes / 2 <= bytes &&
        (best == kept_.end() || it->bytes < best->bytes)) {
      best = it;
    }
  }
  if (best == kept_.end()) {
    // No exception on the data path: memory that cannot be had is the caller's error to
    // report, not the daemon's end.
    std::unique_ptr<std::byte[]> data(new (std::nothrow) std::byte[bytes]);
    if (data == nullptr) return {};
    allocations_.fetch_add(1);
    return {std::move(data), bytes};
  }
  Buffer buffer = std::move(*best);
  kept_.erase(best);
  kept_bytes_.fetch_sub(buffer.bytes);
  return buffer;
}

void ScratchPool::Give(Buffer buffer) {
  if (buffer.data == nullptr || buffer.bytes < kMinKeptBytes || buffer.bytes > keep_bytes_) {
    return;
  }
  while (kept_bytes_.load() + buffer.bytes > keep_bytes_) {
    kept_bytes_.fetch_sub(kept_.front().bytes);
    kept_.pop_front();
  }
  kept_bytes_.fetch_add(buffer.bytes);
  kept_.push_back(std::move(buffer));
}

}  // namespace cclo::hw::emu
