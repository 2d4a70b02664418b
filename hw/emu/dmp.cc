#include "hw/emu/dmp.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hw/emu/reduce.h"

namespace cclo::hw::emu {

using Kind = Endpoint::Kind;

Dmp::Dmp(Rbm& rbm, uint64_t eager_bytes, Counters& counters, Hooks hooks)
    : rbm_(rbm), eager_bytes_(eager_bytes), counters_(counters), hooks_(std::move(hooks)) {}

void Dmp::Submit(std::unique_ptr<CallState> call) {
  CallState& ref = *call;
  deadlines_.insert({ref.deadline, ref.id});
  std::deque<uint64_t>& queue = ref.comm->queues[ref.desc.rank];
  queue.push_back(ref.id);
  calls_[ref.id] = std::move(call);
  if (queue.size() == 1) Start(ref);
}

void Dmp::Start(CallState& call) {
  Communicator& comm = *call.comm;
  const uint32_t rank = call.desc.rank;
  call.moves.resize(call.program.moves.size());
  const uint64_t scratch_bytes = call.program.scratch_elements * DataTypeSize(call.desc.datatype);
  if (scratch_bytes > 0) {
    call.scratch = std::make_unique_for_overwrite<std::byte[]>(scratch_bytes);
    call.buffers.views[static_cast<size_t>(Slot::kScratch)] = {call.scratch.get(), scratch_bytes};
  }
  for (size_t i = 0; i < call.moves.size(); ++i) {
    const Move& move = call.program.moves[i];
    if (move.result.kind == Kind::kNetwork) {
      call.moves[i].sequence = comm.send_sequence[{rank, move.result.peer, move.result.tag}]++;
    } else if (move.op0.kind == Kind::kNetwork || move.op1.kind == Kind::kNetwork) {
      const Endpoint& net = move.op0.kind == Kind::kNetwork ? move.op0 : move.op1;
      call.moves[i].sequence = comm.recv_sequence[{net.peer, rank, net.tag}]++;
    }
  }
  call.running = true;
  if (absl::Status status = Unreachable(call); !status.ok()) return Doom(call, status);
  MarkReady(call.id);
}

void Dmp::Progress() {
  if (progressing_) return;
  progressing_ = true;
  while (!ready_.empty()) {
    const uint64_t id = ready_.front();
    ready_.pop_front();
    auto it = calls_.find(id);
    if (it != calls_.end() && it->second->running) Advance(*it->second);
  }
  finished_.clear();
  progressing_ = false;
}

bool Dmp::DepsDone(const CallState& call, size_t index) const {
  for (uint32_t dep : call.program.moves[index].deps) {
    if (!call.moves[dep].done) return false;
  }
  return true;
}

void Dmp::Advance(CallState& call) {
  if (!call.failure.ok()) {
    if (!InFlight(call)) Finish(call, call.failure);
    return;
  }
  const size_t count = call.program.moves.size();
  while (call.running && call.next_move < count && DepsDone(call, call.next_move)) {
    absl::Status status = StartMove(call, static_cast<uint32_t>(call.next_move++));
    if (!status.ok()) {
      if (call.running) hooks_.fail(*call.comm, status);
      return;
    }
  }
  if (call.running && call.moves_done == count) Finish(call, absl::OkStatus());
}

std::byte* Dmp::Address(const CallState& call, const Endpoint& endpoint) const {
  return call.buffers.views[static_cast<size_t>(endpoint.slot)].data +
         endpoint.offset * DataTypeSize(call.desc.datatype);
}

absl::Status Dmp::StartMove(CallState& call, uint32_t index) {
  const Move& move = call.program.moves[index];
  if (move.result.kind == Kind::kNetwork) return StartSend(call, index);
  if (move.op0.kind == Kind::kNetwork || move.op1.kind == Kind::kNetwork) {
    return StartReceive(call, index);
  }
  if (move.function == Function::kCopy) {
    const uint64_t bytes = move.count * DataTypeSize(call.desc.datatype);
    if (bytes > 0) std::memmove(Address(call, move.result), Address(call, move.op0), bytes);
  } else {
    absl::Status status = Reduce(call.desc.reduce_op, call.desc.datatype, Address(call, move.op0),
                                 Address(call, move.op1), Address(call, move.result), move.count);
    if (!status.ok()) return status;
  }
  MoveDone(call.id, index);
  return absl::OkStatus();
}

absl::Status Dmp::StartReceive(CallState& call, uint32_t index) {
  const Move& move = call.program.moves[index];
  const bool network_is_op0 = move.op0.kind == Kind::kNetwork;
  const Endpoint& net = network_is_op0 ? move.op0 : move.op1;
  const Endpoint& memory = network_is_op0 ? move.op1 : move.op0;
  RxTarget target{
      .bytes = move.count * DataTypeSize(call.desc.datatype),
      .function = move.function,
      .result = move.result.kind == Kind::kMemory ? Address(call, move.result) : nullptr,
      .memory_operand = move.function == Function::kReduce ? Address(call, memory) : nullptr,
      .network_is_op0 = network_is_op0,
      .datatype = call.desc.datatype,
      .reduce_op = call.desc.reduce_op,
      .on_complete = [this, id = call.id, index] { MoveDone(id, index); }};
  absl::Status status = rbm_.Post(ReceiveKey(call, index), std::move(target));
  if (!status.ok()) hooks_.invalid(*call.comm, net.peer, status);
  return status;
}

MessageKey Dmp::ReceiveKey(const CallState& call, uint32_t index) const {
  const Move& move = call.program.moves[index];
  const Endpoint& net = move.op0.kind == Kind::kNetwork ? move.op0 : move.op1;
  return {call.comm->id, net.peer, call.desc.rank, net.tag, call.moves[index].sequence};
}

void Dmp::MoveDone(uint64_t call_id, uint32_t index) {
  auto it = calls_.find(call_id);
  if (it == calls_.end() || !it->second->running) return;
  CallState& call = *it->second;
  if (call.moves[index].done) return;
  call.moves[index].done = true;
  ++call.moves_done;
  MarkReady(call_id);
}

void Dmp::SegmentWritten(uint64_t call_id, uint32_t index) {
  auto it = calls_.find(call_id);
  if (it != calls_.end() && it->second->running && --it->second->moves[index].segments_left == 0) {
    MoveDone(call_id, index);
  }
  Progress();
}

void Dmp::Finish(CallState& call, const absl::Status& status) {
  call.running = false;
  deadlines_.erase({call.deadline, call.id});
  std::deque<uint64_t>& queue = call.comm->queues[call.desc.rank];
  queue.erase(std::find(queue.begin(), queue.end(), call.id));
  auto node = calls_.extract(call.id);
  finished_.push_back(std::move(node.mapped()));
  (status.ok() ? counters_.calls_completed : counters_.calls_failed).fetch_add(1);
  CompletionFn done = std::move(call.done);
  done(Completion{status, call.program.algorithm, call.bytes_sent});
  if (!queue.empty()) {
    auto next = calls_.find(queue.front());
    if (next != calls_.end() && !next->second->running) Start(*next->second);
  }
}

void Dmp::FailCalls(Communicator& comm, const absl::Status& status, uint64_t expired,
                    const absl::Status& expired_status) {
  absl::erase_if(awaited_, [&](const auto& entry) { return entry.first.comm == comm.id; });
  // Each queue from its back, so that finishing a call starts none behind it.
  std::vector<uint64_t> ids;
  for (const auto& [rank, queue] : comm.queues) ids.insert(ids.end(), queue.rbegin(), queue.rend());
  for (uint64_t id : ids) {
    auto it = calls_.find(id);
    if (it != calls_.end()) Finish(*it->second, id == expired ? expired_status : status);
  }
}

absl::Time Dmp::NextDeadline() const {
  return deadlines_.empty() ? absl::InfiniteFuture() : deadlines_.begin()->first;
}

const CallState* Dmp::Expired(absl::Time now) const {
  if (deadlines_.empty() || deadlines_.begin()->first > now) return nullptr;
  return calls_.at(deadlines_.begin()->second).get();
}

}  // namespace cclo::hw::emu
