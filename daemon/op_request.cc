#include "daemon/op_request.h"

#include <cstring>

namespace cclo::daemon {
namespace {

BufferRange FromRef(const cclo::v1::BufferRef& ref) {
  return {ref.buffer_id(), ref.offset(), ref.length()};
}

BufferRange FromRef(const ring::RingBufferRef& ref) {
  return {ref.buffer_id, ref.offset, ref.length};
}

}  // namespace

OpRequest FromSubmitRequest(const cclo::v1::SubmitRequest& request) {
  return {.comm_handle = request.comm_handle(),
          .collective = request.collective(),
          .datatype = request.datatype(),
          .reduce_op = request.reduce_op(),
          .root = request.root(),
          .peer = request.peer(),
          .tag = request.tag(),
          .count = request.count(),
          .in_place = request.in_place(),
          .algorithm = request.algorithm(),
          .send = FromRef(request.send()),
          .recv = FromRef(request.recv()),
          .timeout_ms = request.timeout_ms(),
          .wait_for_room = request.wait_for_room(),
          .after = std::vector<uint64_t>(request.after().begin(), request.after().end())};
}

OpRequest FromCommand(const ring::CommandSlot& slot) {
  return {.comm_handle = slot.comm_handle,
          .collective = slot.collective,
          .datatype = slot.datatype,
          .reduce_op = slot.reduce_op,
          .root = slot.root,
          .peer = slot.peer,
          .tag = slot.tag,
          .count = slot.count,
          .in_place = slot.in_place == 1,
          .algorithm = std::string(slot.algorithm, strnlen(slot.algorithm, ring::kAlgorithmBytes)),
          .send = FromRef(slot.send),
          .recv = FromRef(slot.recv),
          .timeout_ms = slot.timeout_ms,
          .wait_for_room = slot.wait_for_room == 1,
          .after = std::vector<uint64_t>(slot.after, slot.after + slot.after_count)};
}

}  // namespace cclo::daemon
