#include "hw/emu/rbm.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "firmware/registry.h"
#include "hw/emu/reduce.h"

namespace cclo::hw::emu {

std::string DescribeMessage(const MessageKey& key) {
  if (key.tag == kCollectiveTag) {
    return absl::StrCat("collective message from rank ", key.src, " to rank ", key.dst,
                        " (sequence ", key.sequence, ")");
  }
  return absl::StrCat("message from rank ", key.src, " to rank ", key.dst, " (tag ", key.tag,
                      ", sequence ", key.sequence, ")");
}

Rbm::Rbm(uint64_t pool_bytes, uint64_t eager_bytes, uint64_t segment_bytes,
         uint64_t max_waiting_requests, uint32_t local_credits, ClearToSendFn clear_to_send,
         DeferFn defer)
    : eager_bytes_(eager_bytes),
      segment_bytes_(segment_bytes),
      max_waiting_(max_waiting_requests),
      local_credits_(local_credits),
      buffer_bytes_(std::max(eager_bytes, kMinBufferBytes)),
      buffer_count_(pool_bytes / buffer_bytes_),
      clear_to_send_(std::move(clear_to_send)),
      defer_(std::move(defer)),
      pool_(new std::byte[buffer_count_ * buffer_bytes_]) {
  free_.reserve(buffer_count_);
  for (uint64_t i = buffer_count_; i > 0; --i) free_.push_back(static_cast<uint32_t>(i - 1));
}

absl::Status Rbm::Mismatch(const MessageKey& key, const std::string& problem) const {
  return absl::InvalidArgumentError(absl::StrCat(DescribeMessage(key), ": ", problem));
}

absl::Status Rbm::CheckFits(const MessageKey& key, uint64_t total, const CallSignature& call,
                            const RxTarget& target) const {
  // A call that differs says more than the sizes that differ with it. The calls come first:
  // they are what to fix, and the other ranks get this behind their own longer prefix, in
  // the 255 bytes of a completion ring's message.
  if (call != target.call) {
    std::string sent = DescribeSignature(call);
    std::string posted = DescribeSignature(target.call);
    if (sent == posted) {  // only the algorithms differ
      absl::StrAppend(&sent, " by ", firmware::NameAt(call.collective, call.algorithm));
      absl::StrAppend(&posted, " by ",
                      firmware::NameAt(target.call.collective, target.call.algorithm));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(sent, " sent to ", posted, ": ", DescribeMessage(key)));
  }
  if (total != target.bytes) {
    return Mismatch(
        key, absl::StrCat("has ", total, " bytes but the posted receive expects ", target.bytes));
  }
  return absl::OkStatus();
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
  if (PartlyOverlap(data, out, length)) {
    bounce_.assign(data, data + length);
    data = bounce_.data();
  }
  return Reduce(target.reduce_op, target.datatype, target.network_is_op0 ? data : memory,
                target.network_is_op0 ? memory : data, out, length / element);
}

absl::Status Rbm::ApplyLocal(const MessageKey& key, Stream& stream) {
  stream.arrived = stream.total;
  const RxTarget& target = stream.target;
  const uint64_t element = DataTypeSize(target.datatype);
  uint64_t length = stream.total - stream.applied;
  // In pieces only where every piece is whole elements and none reads what an earlier one
  // wrote; the first piece checks the op and datatype, so the later ones cannot fail.
  if (target.result != nullptr && stream.total % element == 0 &&
      !PartlyOverlap(target.result, stream.source, stream.total) &&
      !(target.function == Function::kReduce &&
        PartlyOverlap(target.result, target.memory_operand, stream.total))) {
    length = std::min(length, std::max(element, piece_bytes_ / element * element));
  }
  absl::Status status = Apply(stream, stream.applied, stream.source + stream.applied, length);
  if (status.ok() && stream.applied < stream.total) {
    defer_(key.comm, [this, key] {
      auto it = streams_.find(key);
      if (it == streams_.end()) return;  // dropped with its communicator
      (void)ApplyLocal(key, it->second);
      MaybeComplete(key);
    });
    return status;
  }
  stream.source = nullptr;
  stream.detached = {};
  if (std::function<void()> sent = std::exchange(stream.on_sent, nullptr)) sent();
  return status;
}

void Rbm::Clear(const MessageKey& key, Stream& stream) { clear_to_send_(key, stream.total); }

void Rbm::MaybeComplete(const MessageKey& key) {
  auto it = streams_.find(key);
  if (it == streams_.end()) return;
  const Stream& stream = it->second;
  if (!stream.posted || stream.protocol == Protocol::kNone || stream.landing != Landing::kNone ||
      stream.applied != stream.total) {
    return;
  }
  std::function<void()> on_complete = std::move(it->second.target.on_complete);
  streams_.erase(it);
  if (on_complete) on_complete();  // null once abandoned
}

absl::Status Rbm::Post(const MessageKey& key, RxTarget target) {
  Stream& stream = streams_[key];
  if (stream.posted) {
    return absl::InternalError(absl::StrCat(DescribeMessage(key), ": receive posted twice"));
  }
  if (stream.protocol != Protocol::kNone) {
    if (absl::Status fits = CheckFits(key, stream.total, stream.call, target); !fits.ok()) {
      return fits;
    }
  }
  stream.posted = true;
  stream.target = std::move(target);
  absl::Status status;
  switch (stream.protocol) {
    case Protocol::kNone:
      return absl::OkStatus();
    case Protocol::kEager:
      if (stream.landing != Landing::kNone) return absl::OkStatus();  // Landed applies it
      status = Apply(stream, 0, stream.buffer == kNoBuffer ? nullptr : BufferData(stream.buffer),
                     stream.total);
      if (stream.account == 0) --local_staged_[key.comm];
      Release(stream.account, std::exchange(stream.buffer, kNoBuffer), true);
      break;
    case Protocol::kRendezvous:
      StopWaiting(stream.account);
      Clear(key, stream);
      break;
    case Protocol::kLocal:
      status = ApplyLocal(key, stream);
      break;
  }
  if (status.ok()) MaybeComplete(key);
  return status;
}

absl::Status Rbm::Request(const poe::SegmentHeader& header, uint64_t account) {
  const MessageKey key = MessageKey::Of(header);
  Stream& stream = streams_[key];
  if (stream.protocol != Protocol::kNone) {
    return Mismatch(key, "rendezvous request for a message that was already announced");
  }
  if (stream.posted) {
    if (absl::Status fits = CheckFits(key, header.total, header.call, stream.target); !fits.ok()) {
      return fits;
    }
  }
  if (!stream.posted) {
    auto it = accounts_.find(account);
    if (it == accounts_.end() || it->second.waiting >= max_waiting_) {
      return Mismatch(key, absl::StrCat("rendezvous request beyond the ", max_waiting_,
                                        " its sender may have waiting for their receives "
                                        "(rendezvous_waiting_per_peer)"));
    }
    ++it->second.waiting;
  }
  stream.protocol = Protocol::kRendezvous;
  stream.total = header.total;
  stream.call = header.call;
  stream.account = account;
  if (stream.posted) {
    Clear(key, stream);
    MaybeComplete(key);
  }
  return absl::OkStatus();
}

absl::Status Rbm::AcceptEager(const MessageKey& key, const Stream& stream,
                              const poe::SegmentHeader& header, uint64_t account) const {
  auto it = accounts_.find(account);
  if (it == accounts_.end() || it->second.granted == 0) {
    return Mismatch(key, absl::StrCat("eager message beyond the ",
                                      it == accounts_.end() ? 0 : it->second.reserved,
                                      " credits granted to its sender"));
  }
  if (header.length > eager_bytes_) {
    return Mismatch(key, absl::StrCat("eager message of ", header.length,
                                      " bytes exceeds the eager limit of ", eager_bytes_));
  }
  if (stream.protocol != Protocol::kNone) {
    return Mismatch(key, "eager message that was already announced");
  }
  if (stream.posted) return CheckFits(key, header.total, header.call, stream.target);
  return absl::OkStatus();
}

absl::Status Rbm::AcceptData(const MessageKey& key, const Stream& stream,
                             const poe::SegmentHeader& header) const {
  std::string problem;
  if (stream.protocol != Protocol::kRendezvous || !stream.posted) {
    problem = "rendezvous data without a clear-to-send";
  } else if (header.total != stream.total) {
    problem = absl::StrCat("total changed from ", stream.total, " to ", header.total, " bytes");
  } else if (header.offset != stream.arrived) {
    problem = absl::StrCat("segment at offset ", header.offset, " arrived where offset ",
                           stream.arrived, " was due");
  } else if (header.length > segment_bytes_) {
    problem = absl::StrCat("segment of ", header.length, " bytes exceeds the segment size of ",
                           segment_bytes_);
  }
  return problem.empty() ? absl::OkStatus() : Mismatch(key, problem);
}

absl::StatusOr<std::byte*> Rbm::Land(const poe::SegmentHeader& header, std::byte* scratch,
                                     uint64_t account) {
  const MessageKey key = MessageKey::Of(header);
  Stream& stream = streams_[key];
  const bool eager = header.type == poe::SegmentType::kEagerData;
  absl::Status status =
      eager ? AcceptEager(key, stream, header, account) : AcceptData(key, stream, header);
  if (!status.ok()) return status;
  if (eager) {
    --accounts_[account].granted;
    stream.protocol = Protocol::kEager;
    stream.total = header.total;
    stream.call = header.call;
    stream.account = account;
  }
  stream.landing_applied = 0;
  const RxTarget& target = stream.target;
  if (stream.posted && target.function == Function::kCopy && target.result != nullptr &&
      header.length > 0) {
    stream.landing = Landing::kDirect;
    stream.landing_at = target.result + header.offset;
  } else if (stream.posted || header.length == 0) {
    stream.landing = Landing::kScratch;
    stream.landing_at = scratch;
  } else {
    // Eager and early: the account's reservation guarantees a free buffer.
    stream.buffer = Allocate();
    if (stream.buffer == kNoBuffer) {
      return absl::InternalError(absl::StrCat(DescribeMessage(key), ": rx pool empty"));
    }
    ++accounts_[account].staged;
    --promised_;
    stream.landing = Landing::kPool;
    stream.landing_at = BufferData(stream.buffer);
  }
  return stream.landing_at;
}

absl::Status Rbm::LandedPart(const poe::SegmentHeader& header, uint64_t landed) {
  auto it = streams_.find(MessageKey::Of(header));
  if (it == streams_.end() || it->second.landing != Landing::kScratch || !it->second.posted ||
      it->second.target.function != Function::kReduce) {
    return absl::OkStatus();  // copies land in place; staged messages wait for their receive
  }
  Stream& stream = it->second;
  const uint64_t element = DataTypeSize(stream.target.datatype);
  // A segment not made of whole elements is refused whole by Landed, having changed nothing.
  if (header.offset % element != 0 || header.length % element != 0) return absl::OkStatus();
  const uint64_t ready = std::min<uint64_t>(landed, header.length) / element * element;
  if (ready <= stream.landing_applied) return absl::OkStatus();
  const uint64_t from = std::exchange(stream.landing_applied, ready);
  return Apply(stream, header.offset + from, stream.landing_at + from, ready - from);
}

absl::Status Rbm::Landed(const poe::SegmentHeader& header) {
  const MessageKey key = MessageKey::Of(header);
  auto it = streams_.find(key);
  if (it == streams_.end() || it->second.landing == Landing::kNone) {
    return absl::InternalError(absl::StrCat(DescribeMessage(key), ": landed unannounced"));
  }
  Stream& stream = it->second;
  const Landing landing = std::exchange(stream.landing, Landing::kNone);
  const uint64_t applied_part = std::exchange(stream.landing_applied, 0);
  stream.arrived += header.length;
  if (!stream.posted) return absl::OkStatus();  // eager, staged until its receive is posted
  absl::Status status;
  if (landing == Landing::kDirect) {
    stream.applied += header.length;
    // Abandoned while this segment landed in its memory: the memory is free only now.
    if (stream.target.result == nullptr) std::exchange(stream.target.on_complete, nullptr)();
  } else {
    status = Apply(stream, header.offset + applied_part, stream.landing_at + applied_part,
                   header.length - applied_part);
  }
  if (stream.protocol == Protocol::kEager) {
    Release(stream.account, std::exchange(stream.buffer, kNoBuffer), true);
  }
  if (status.ok()) MaybeComplete(key);
  return status;
}

absl::StatusOr<bool> Rbm::Deliver(const MessageKey& key, const CallSignature& call,
                                  const std::byte* data, uint64_t bytes, bool eager,
                                  std::function<void()> on_sent) {
  Stream& stream = streams_[key];
  if (stream.protocol != Protocol::kNone) {
    return absl::InternalError(absl::StrCat(DescribeMessage(key), ": sent twice"));
  }
  if (stream.posted) {
    if (absl::Status fits = CheckFits(key, bytes, call, stream.target); !fits.ok()) return fits;
  }
  stream.total = bytes;
  stream.call = call;
  // Looked up only for a message that may be staged: most find their receive posted.
  if (!stream.posted && eager && (bytes == 0 || free_.size() > promised_) &&
      local_staged_[key.comm] < local_credits_) {
    ++local_staged_[key.comm];
    stream.protocol = Protocol::kEager;
    stream.arrived = bytes;
    if (bytes > 0) {
      stream.buffer = Allocate();
      std::memcpy(BufferData(stream.buffer), data, bytes);
    }
    on_sent();
    return true;
  }
  stream.protocol = Protocol::kLocal;
  stream.source = data;
  stream.on_sent = std::move(on_sent);
  if (!stream.posted) return false;
  if (absl::Status status = ApplyLocal(key, stream); !status.ok()) return status;
  MaybeComplete(key);
  return eager;
}

void Rbm::Detach(const MessageKey& key) {
  auto it = streams_.find(key);
  // Not once its source went (every byte applied) or was copied already.
  if (it == streams_.end() || it->second.protocol != Protocol::kLocal || !it->second.on_sent) {
    return;
  }
  Stream& stream = it->second;
  stream.detached.assign(stream.source, stream.source + stream.total);
  stream.source = stream.detached.data();
  stream.on_sent = nullptr;
}

bool Rbm::Arrived(const MessageKey& key) const {
  auto it = streams_.find(key);
  return it != streams_.end() && !it->second.posted && AllArrived(it->second);
}

std::string Rbm::Describe(const MessageKey& key) const {
  auto it = streams_.find(key);
  if (it == streams_.end() || it->second.protocol == Protocol::kNone) return "nothing arrived";
  const Stream& stream = it->second;
  constexpr const char* kProtocols[] = {"", "eager", "rendezvous", "local"};
  return absl::StrCat(kProtocols[static_cast<int>(stream.protocol)], ", ", stream.arrived, " of ",
                      stream.total, " bytes arrived, ", stream.applied, " applied",
                      stream.landing == Landing::kNone ? "" : ", a segment landing");
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
  local_staged_.erase(comm);
}

void Rbm::DropIf(const std::function<bool(const MessageKey&, const Stream&)>& drop) {
  std::vector<std::pair<uint64_t, uint32_t>> freed;
  for (auto it = streams_.begin(); it != streams_.end();) {
    const Stream& stream = it->second;
    if (!drop(it->first, stream)) {
      ++it;
      continue;
    }
    if (stream.protocol == Protocol::kRendezvous && !stream.posted) StopWaiting(stream.account);
    freed.push_back({stream.account, stream.buffer});
    streams_.erase(it++);
  }
  for (const auto& [account, buffer] : freed) Release(account, buffer, false);
}

}  // namespace cclo::hw::emu
