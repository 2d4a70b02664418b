#include "hw/emu/rbm.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hw/emu/reduce.h"

namespace cclo::hw::emu {

std::string DescribeMessage(const MessageKey& key) {
  return absl::StrCat("message from rank ", key.src, " to rank ", key.dst, " (tag ", key.tag,
                      ", sequence ", key.sequence, ") of communicator ", CommIdHex(key.comm));
}

Rbm::Rbm(uint64_t pool_bytes, uint64_t buffer_bytes, std::function<void()> on_space)
    : buffer_bytes_(buffer_bytes),
      buffer_count_(pool_bytes / buffer_bytes),
      on_space_(std::move(on_space)),
      pool_(new std::byte[buffer_count_ * buffer_bytes_]) {
  free_.reserve(buffer_count_);
  for (uint64_t i = buffer_count_; i > 0; --i) free_.push_back(static_cast<uint32_t>(i - 1));
}

uint32_t Rbm::Allocate() {
  if (free_.empty()) return kNoBuffer;
  const uint32_t buffer = free_.back();
  free_.pop_back();
  used_bytes_.fetch_add(buffer_bytes_);
  return buffer;
}

void Rbm::Free(uint32_t buffer) {
  if (buffer == kNoBuffer) return;
  free_.push_back(buffer);
  used_bytes_.fetch_sub(buffer_bytes_);
  on_space_();
}

absl::Status Rbm::Accept(const MessageKey& key, Stream& stream, const poe::SegmentHeader& header) {
  if (!stream.seen) {
    stream.seen = true;
    stream.total = header.total;
  }
  std::string problem;
  if (header.total != stream.total) {
    problem = absl::StrCat("total changed from ", stream.total, " to ", header.total, " bytes");
  } else if (stream.posted && stream.total != stream.target.bytes) {
    problem = absl::StrCat("has ", stream.total, " bytes but the posted receive expects ",
                           stream.target.bytes);
  } else if (header.offset != stream.arrived) {
    problem = absl::StrCat("segment at offset ", header.offset, " arrived where offset ",
                           stream.arrived, " was due");
  } else if (header.length > buffer_bytes_) {
    problem = absl::StrCat("segment of ", header.length, " bytes exceeds the ", buffer_bytes_,
                           "-byte rx buffers");
  } else if (stream.landing != Landing::kNone) {
    problem = "segment arrived while the previous one was still landing";
  }
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(DescribeMessage(key), ": ", problem));
}

absl::Status Rbm::Apply(Stream& stream, uint64_t offset, const std::byte* data, uint64_t length) {
  const RxTarget& target = stream.target;
  stream.applied += length;
  if (length == 0 || target.result == nullptr) return absl::OkStatus();
  std::byte* out = target.result + offset;
  if (target.function == Function::kCopy) {
    if (data != out) std::memmove(out, data, length);
    return absl::OkStatus();
  }
  const uint64_t element = DataTypeSize(target.datatype);
  if (offset % element != 0 || length % element != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment [", offset, ", ", offset + length, ") of a reduce receive is not aligned to ",
        element, "-byte ", std::string(DataTypeName(target.datatype)), " elements"));
  }
  const std::byte* memory = target.memory_operand + offset;
  // The reduce kernel allows out == a or out == b but no other overlap.
  if (data != out && data < out + length && out < data + length) {
    bounce_.assign(data, data + length);
    data = bounce_.data();
  }
  return Reduce(target.reduce_op, target.datatype, target.network_is_op0 ? data : memory,
                target.network_is_op0 ? memory : data, out, length / element);
}

void Rbm::MaybeComplete(const MessageKey& key) {
  auto it = streams_.find(key);
  if (it == streams_.end()) return;
  Stream& stream = it->second;
  if (!stream.posted || !stream.seen || stream.applied != stream.total) return;
  std::function<void()> on_complete = std::move(stream.target.on_complete);
  streams_.erase(it);
  if (on_complete) on_complete();  // null once abandoned
}

absl::Status Rbm::Post(const MessageKey& key, RxTarget target) {
  Stream& stream = streams_[key];
  if (stream.posted) {
    return absl::InternalError(absl::StrCat(DescribeMessage(key), ": receive posted twice"));
  }
  if (stream.seen && stream.total != target.bytes) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeMessage(key), ": has ", stream.total,
                                                   " bytes but the posted receive expects ",
                                                   target.bytes));
  }
  stream.posted = true;
  stream.target = std::move(target);
  while (!stream.staged.empty()) {
    const Staged staged = stream.staged.front();
    stream.staged.pop_front();
    absl::Status status =
        Apply(stream, staged.offset,
              staged.buffer == kNoBuffer ? nullptr : BufferData(staged.buffer), staged.length);
    Free(staged.buffer);
    if (!status.ok()) return status;
  }
  MaybeComplete(key);
  return absl::OkStatus();
}

absl::StatusOr<std::byte*> Rbm::Land(const poe::SegmentHeader& header, std::byte* scratch) {
  const MessageKey key = MessageKey::Of(header);
  Stream& stream = streams_[key];
  if (absl::Status status = Accept(key, stream, header); !status.ok()) return status;
  if (header.length == 0) {
    stream.landing = Landing::kEmpty;
    return scratch;
  }
  if (stream.posted) {
    const RxTarget& target = stream.target;
    const bool direct = target.function == Function::kCopy && target.result != nullptr;
    stream.landing = direct ? Landing::kDirect : Landing::kScratch;
    stream.landing_at = direct ? target.result + header.offset : scratch;
    return stream.landing_at;
  }
  const uint32_t buffer = Allocate();
  if (buffer == kNoBuffer) return nullptr;
  stream.landing = Landing::kPool;
  stream.landing_buffer = buffer;
  stream.landing_at = BufferData(buffer);
  return stream.landing_at;
}

absl::Status Rbm::Landed(const poe::SegmentHeader& header) {
  const MessageKey key = MessageKey::Of(header);
  auto it = streams_.find(key);
  if (it == streams_.end() || it->second.landing == Landing::kNone) {
    return absl::InternalError(absl::StrCat(DescribeMessage(key), ": landed unannounced"));
  }
  Stream& stream = it->second;
  const Landing landing = std::exchange(stream.landing, Landing::kNone);
  const uint32_t buffer = std::exchange(stream.landing_buffer, kNoBuffer);
  stream.arrived += header.length;
  absl::Status status;
  if (!stream.posted) {
    stream.staged.push_back({buffer, header.offset, header.length});
    return absl::OkStatus();
  }
  if (landing == Landing::kDirect) {
    stream.applied += header.length;
    // Abandoned while this segment landed in its memory: the memory is free only now.
    if (stream.target.result == nullptr) std::exchange(stream.target.on_complete, nullptr)();
  } else {
    status = Apply(stream, header.offset, stream.landing_at, header.length);
    Free(buffer);
  }
  if (status.ok()) MaybeComplete(key);
  return status;
}

absl::StatusOr<bool> Rbm::Deliver(const poe::SegmentHeader& header, const std::byte* data) {
  const MessageKey key = MessageKey::Of(header);
  Stream& stream = streams_[key];
  if (absl::Status status = Accept(key, stream, header); !status.ok()) return status;
  if (stream.posted) {
    stream.arrived += header.length;
    if (absl::Status status = Apply(stream, header.offset, data, header.length); !status.ok()) {
      return status;
    }
    MaybeComplete(key);
    return true;
  }
  uint32_t buffer = kNoBuffer;
  if (header.length > 0) {
    buffer = Allocate();
    if (buffer == kNoBuffer) return false;
    std::memcpy(BufferData(buffer), data, header.length);
  }
  stream.arrived += header.length;
  stream.staged.push_back({buffer, header.offset, header.length});
  return true;
}

bool Rbm::Arrived(const MessageKey& key) const {
  auto it = streams_.find(key);
  return it != streams_.end() && !it->second.posted && AllArrived(it->second);
}

bool Rbm::Abandon(const MessageKey& key) {
  auto it = streams_.find(key);
  if (it == streams_.end() || !it->second.posted) return true;
  RxTarget& target = it->second.target;
  target.function = Function::kCopy;  // with no result: discard
  target.result = nullptr;
  target.memory_operand = nullptr;
  if (it->second.landing == Landing::kDirect) return false;
  target.on_complete = nullptr;
  return true;
}

void Rbm::DropUnfinished(const CommId& comm, const std::vector<uint32_t>& sources) {
  DropIf([&](const MessageKey& key, const Stream& stream) {
    return key.comm == comm && !AllArrived(stream) &&
           std::find(sources.begin(), sources.end(), key.src) != sources.end();
  });
}

void Rbm::Drop(const CommId& comm) {
  DropIf([&](const MessageKey& key, const Stream&) { return key.comm == comm; });
}

void Rbm::DropIf(const std::function<bool(const MessageKey&, const Stream&)>& drop) {
  std::vector<uint32_t> freed;
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (!drop(it->first, it->second)) {
      ++it;
      continue;
    }
    for (const Staged& staged : it->second.staged) freed.push_back(staged.buffer);
    freed.push_back(it->second.landing_buffer);
    streams_.erase(it++);
  }
  for (uint32_t buffer : freed) Free(buffer);
}

}  // namespace cclo::hw::emu
