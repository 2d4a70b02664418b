// The DMP's sends. To another engine, per message: eager (one segment on one of the
// link's credits) when the call's protocol allows it, the message has at most the link's
// eager limit and a credit is there; otherwise a rendezvous request, and on the
// receiver's clear-to-send the data in segments of the session's size or the call's
// smaller one (a whole number of elements, so a reduce receive can apply each on
// arrival). A sender never waits for a credit: one could be held by a
// message the receiver takes only after this one, so waiting could deadlock. To a rank on
// this engine the RBM takes the message (staged when small, a buffer is free and the
// communicator has fewer than credits_per_peer staged, else copied straight into the
// receive once it is posted). Every segment is written from the call's memory; a failing
// call lets go of the sends still waiting for their receive by copying their data. Cost:
// O(segments) per send, one hash entry per rendezvous send.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hw/emu/dmp.h"
#include "hw/emu/reduce.h"

namespace cclo::hw::emu {

MessageKey Dmp::SendKey(const CallState& call, uint32_t index) const {
  const Endpoint& result = call.program.moves[index].result;
  return {call.comm->id, call.desc.rank, result.peer, result.tag, call.moves[index].sequence};
}

absl::Status Dmp::StartSend(CallState& call, uint32_t index) {
  const Move& move = call.program.moves[index];
  CallState::MoveState& state = call.moves[index];
  const uint64_t element = DataTypeSize(call.desc.datatype);
  const uint64_t bytes = move.count * element;
  // 1. The data: op0 itself, or op0 (+) op1 computed into the move's own buffer.
  state.source = Address(call, move.op0);
  if (move.function == Function::kReduce) {
    state.reduced.resize(bytes);
    absl::Status status = Reduce(call.desc.reduce_op, call.desc.datatype, state.source,
                                 Address(call, move.op1), state.reduced.data(), move.count);
    if (!status.ok()) return status;
    state.source = state.reduced.data();
  }
  call.bytes_sent += bytes;
  counters_.bytes_sent.fetch_add(bytes);
  Communicator& comm = *call.comm;
  const uint32_t peer = move.result.peer;
  if (comm.local[peer]) return SendLocal(call, index, bytes);
  PeerLink* link = hooks_.link_for(comm, peer);
  if (link == nullptr) {
    return absl::UnavailableError(absl::StrCat("no data session to rank ", peer));
  }
  const MessageKey key = SendKey(call, index);
  poe::SegmentHeader header{.comm = key.comm,
                            .src = key.src,
                            .dst = key.dst,
                            .tag = key.tag,
                            .sequence = key.sequence,
                            .total = bytes,
                            .call = call.Signature()};
  // 2. Eager when small enough and a credit is there: one segment, done once written.
  if (call.desc.protocol == Protocol::kEager && link->eager_bytes > 0 &&
      bytes <= link->eager_bytes) {
    if (link->send_credits > 0) {
      --link->send_credits;
      counters_.eager_messages.fetch_add(1);
      header.type = poe::SegmentType::kEagerData;
      header.length = static_cast<uint32_t>(bytes);
      state.segments_left = 1;
      ScheduleSegment(call, index, header, state.source);
      return absl::OkStatus();
    }
    counters_.eager_fallbacks.fetch_add(1);
  }
  // 3. Otherwise rendezvous: ask, and send the data when the receiver clears it.
  counters_.rendezvous_messages.fetch_add(1);
  uint64_t segment = link->segment_bytes;
  if (call.desc.segment_bytes > 0) segment = std::min(segment, call.desc.segment_bytes);
  segment = std::max(element, segment / element * element);
  awaited_[key] = {call.id, index, bytes, header.call, segment, state.source, nullptr};
  Schedule(call, poe::kHeaderBytes, [this, key](CallState& call) { Ask(*call.comm, key); });
  return absl::OkStatus();
}

void Dmp::Ask(Communicator& comm, const MessageKey& key) {
  auto it = awaited_.find(key);
  if (it == awaited_.end() || it->second.request != Request::kUnsent) return;
  it->second.request = Request::kQueued;
  PeerLink* link = hooks_.link_for(comm, key.dst);
  if (link == nullptr) return;
  const poe::SegmentHeader header{.type = poe::SegmentType::kRequest,
                                  .comm = key.comm,
                                  .src = key.src,
                                  .dst = key.dst,
                                  .tag = key.tag,
                                  .sequence = key.sequence,
                                  .total = it->second.bytes,
                                  .call = it->second.call};
  link->Send(header, nullptr, [this, key] {
    if (auto it = awaited_.find(key); it != awaited_.end()) it->second.request = Request::kWritten;
  });
}

void Dmp::ScheduleSegment(const CallState& call, uint32_t index, const poe::SegmentHeader& header,
                          const std::byte* payload) {
  Schedule(
      call, poe::kHeaderBytes + header.length, [this, index, header, payload](CallState& call) {
        if (PeerLink* link = hooks_.link_for(*call.comm, header.dst)) {
          link->Send(header, payload, [this, id = call.id, index] { SegmentWritten(id, index); });
        }
      });
}

absl::Status Dmp::SendLocal(CallState& call, uint32_t index, uint64_t bytes) {
  const bool eager =
      call.desc.protocol == Protocol::kEager && eager_bytes_ > 0 && bytes <= eager_bytes_;
  absl::StatusOr<bool> went =
      rbm_.Deliver(SendKey(call, index), call.Signature(), call.moves[index].source, bytes, eager,
                   [this, id = call.id, index] { MoveDone(id, index); });
  if (!went.ok()) return went.status();
  (*went ? counters_.eager_messages : counters_.rendezvous_messages).fetch_add(1);
  if (eager && !*went) counters_.eager_fallbacks.fetch_add(1);
  return absl::OkStatus();
}

absl::Status Dmp::ClearToSend(Communicator& comm, const poe::SegmentHeader& header) {
  const MessageKey key = MessageKey::Of(header);
  auto it = awaited_.find(key);
  if (it == awaited_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("clear-to-send for the ", DescribeMessage(key),
                                                   ", which this engine is not sending"));
  }
  if (header.total != it->second.bytes) {
    return absl::InvalidArgumentError(absl::StrCat("clear-to-send for ", header.total,
                                                   " bytes of the ", DescribeMessage(key),
                                                   ", which has ", it->second.bytes));
  }
  const AwaitedSend send = std::move(it->second);
  awaited_.erase(it);
  PeerLink* link = hooks_.link_for(comm, key.dst);
  auto call = calls_.find(send.call_id);
  if (send.bytes == 0) {
    if (call != calls_.end()) MoveDone(send.call_id, send.index);
    return absl::OkStatus();
  }
  const uint64_t segments = (send.bytes + send.segment - 1) / send.segment;
  if (call != calls_.end()) call->second->moves[send.index].segments_left = segments;
  poe::SegmentHeader data = header;
  data.type = poe::SegmentType::kRendezvousData;
  for (uint64_t offset = 0; offset < send.bytes; offset += send.segment) {
    data.offset = offset;
    data.length = static_cast<uint32_t>(std::min(send.segment, send.bytes - offset));
    if (send.copy != nullptr) {
      // A failing call let go of it: it goes at once, keeping the copy until written.
      link->Send(data, send.source + offset, [copy = send.copy] {});
    } else if (call != calls_.end()) {
      ScheduleSegment(*call->second, send.index, data, send.source + offset);
    }
  }
  return absl::OkStatus();
}

bool Dmp::LetGo(CallState& call, uint32_t index) {
  const MessageKey key = SendKey(call, index);
  if (call.comm->local[key.dst]) {
    rbm_.Detach(key);
    return true;
  }
  auto it = awaited_.find(key);
  if (it == awaited_.end()) return false;  // its segments are queued
  if (call.comm->departed.contains(key.dst)) {
    awaited_.erase(it);
    return true;
  }
  AwaitedSend& send = it->second;
  auto copy = std::make_shared<std::vector<std::byte>>(send.source, send.source + send.bytes);
  send.source = copy->data();
  send.copy = std::move(copy);
  send.call_id = 0;
  // Its request may still wait in the scheduler, which runs nothing of a finished call.
  Ask(*call.comm, key);
  return true;
}

}  // namespace cclo::hw::emu
