// What Ops::Submit takes: the fields of a Submit, from the Submit RPC or from a command-ring
// slot. A plain struct, so that the ring path builds no protobuf message per op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cclo/v1/client.pb.h"
#include "cclo/v1/ring.h"

namespace cclo::daemon {

/// A buffer range as in cclo.v1.BufferRef.
struct BufferRange {
  uint64_t buffer_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// The fields of a cclo.v1.SubmitRequest. The enum fields are kept as the client sent them,
/// for Submit to refuse a value out of range by its number.
struct OpRequest {
  uint64_t comm_handle = 0;
  int32_t collective = 0;
  int32_t datatype = 0;
  int32_t reduce_op = 0;
  uint32_t root = 0;
  uint32_t peer = 0;
  uint32_t tag = 0;
  uint64_t count = 0;
  bool in_place = false;
  std::string algorithm;
  BufferRange send;
  BufferRange recv;
  uint32_t timeout_ms = 0;
  bool wait_for_room = false;
  std::vector<uint64_t> after;
};

OpRequest FromSubmitRequest(const cclo::v1::SubmitRequest& request);
/// The request of a SUBMIT command slot that ring::CheckCommand accepted.
OpRequest FromCommand(const ring::CommandSlot& slot);

}  // namespace cclo::daemon
