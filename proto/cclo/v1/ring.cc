#include "cclo/v1/ring.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cclo::ring {
namespace {

void PutRef(const v1::BufferRef& ref, RingBufferRef& out) {
  out = {ref.buffer_id(), ref.offset(), ref.length()};
}

absl::Status CheckFlag(uint8_t value, const char* name) {
  if (value > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("command slot field ", name, " is ", value, "; expected 0 or 1"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFits(const v1::SubmitRequest& request, size_t after_count) {
  if (request.algorithm().size() >= kAlgorithmBytes) {
    return absl::InvalidArgumentError(absl::StrCat("algorithm name of ", request.algorithm().size(),
                                                   " bytes does not fit a command slot (at most ",
                                                   kAlgorithmBytes - 1, ")"));
  }
  if (after_count > kMaxAfter) {
    return absl::InvalidArgumentError(
        absl::StrCat("after lists ", after_count, " ops; a command slot holds ", kMaxAfter));
  }
  return absl::OkStatus();
}

absl::Status EncodeCommand(const v1::SubmitRequest& request, uint64_t cookie, CommandSlot& slot) {
  if (absl::Status fits = CheckFits(request, request.after_size()); !fits.ok()) return fits;
  slot = CommandSlot{};
  slot.cookie = cookie;
  slot.comm_handle = request.comm_handle();
  slot.count = request.count();
  slot.collective = request.collective();
  slot.datatype = request.datatype();
  slot.reduce_op = request.reduce_op();
  slot.root = request.root();
  slot.peer = request.peer();
  slot.tag = request.tag();
  slot.timeout_ms = request.timeout_ms();
  slot.in_place = request.in_place() ? 1 : 0;
  slot.wait_for_room = request.wait_for_room() ? 1 : 0;
  PutRef(request.send(), slot.send);
  PutRef(request.recv(), slot.recv);
  slot.after_count = static_cast<uint32_t>(request.after_size());
  std::copy(request.after().begin(), request.after().end(), slot.after);
  PutText(request.algorithm(), slot.algorithm, kAlgorithmBytes);
  return absl::OkStatus();
}

CommandSlot EncodeRelease(const std::vector<uint64_t>& op_ids) {
  CommandSlot slot{};
  slot.kind = static_cast<uint8_t>(CommandKind::kRelease);
  slot.after_count = static_cast<uint32_t>(std::min<size_t>(op_ids.size(), kMaxAfter));
  std::copy_n(op_ids.begin(), slot.after_count, slot.after);
  return slot;
}

absl::Status CheckCommand(const CommandSlot& slot) {
  if (absl::Status in_place = CheckFlag(slot.in_place, "in_place"); !in_place.ok()) {
    return in_place;
  }
  if (absl::Status wait = CheckFlag(slot.wait_for_room, "wait_for_room"); !wait.ok()) {
    return wait;
  }
  if (slot.kind != static_cast<uint8_t>(CommandKind::kSubmit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("command slot kind ", slot.kind, " is not a submission"));
  }
  if (slot.reserved != 0 || slot.reserved2 != 0) {
    return absl::InvalidArgumentError("command slot has nonzero reserved bytes");
  }
  if (slot.after_count > kMaxAfter) {
    return absl::InvalidArgumentError(
        absl::StrCat("command slot after_count ", slot.after_count, " exceeds ", kMaxAfter));
  }
  if (std::memchr(slot.algorithm, 0, kAlgorithmBytes) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "command slot algorithm is not NUL-terminated within ", kAlgorithmBytes, " bytes"));
  }
  return absl::OkStatus();
}

void PutText(std::string_view text, char* out, size_t size) {
  constexpr std::string_view kCut = "...";
  size_t length = std::min(text.size(), size - 1);
  const bool cut = length < text.size();
  if (cut) {
    length = size - 1 - kCut.size();
    // Not inside a UTF-8 character: back over its continuation bytes.
    while (length > 0 && (static_cast<unsigned char>(text[length]) & 0xC0) == 0x80) --length;
  }
  text.copy(out, length);  // not memcpy: an empty text may have no pointer
  if (cut) {
    std::memcpy(out + length, kCut.data(), kCut.size());
    length += kCut.size();
  }
  std::memset(out + length, 0, size - length);
}

std::string GetText(const char* in, size_t size) {
  const void* nul = std::memchr(in, 0, size);
  return std::string(in, nul ? static_cast<const char*>(nul) - in : size);
}

}  // namespace cclo::ring
