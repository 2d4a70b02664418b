#include "hw/emu/dmp.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hw/emu/reduce.h"

namespace cclo::hw::emu {

using Kind = Endpoint::Kind;

namespace {

/// Sends and receives: calls of one rank that may run side by side.
bool PointToPoint(const CallState& call) {
  return call.desc.collective == Collective::kSend || call.desc.collective == Collective::kRecv;
}

/// What a send reads or a receive writes.
BufferView Touched(const CallState& call) {
  const Slot slot = call.desc.collective == Collective::kRecv ? Slot::kResult : Slot::kOp0;
  return call.buffers.views[static_cast<size_t>(slot)];
}

/// Two sends or receives that may not run side by side: one writes memory the other uses.
bool Conflict(const CallState& a, const CallState& b) {
  if (a.desc.collective == Collective::kSend && b.desc.collective == Collective::kSend) {
    return false;
  }
  const BufferView x = Touched(a), y = Touched(b);
  return x.bytes > 0 && y.bytes > 0 && x.data < y.data + y.bytes && y.data < x.data + x.bytes;
}

/// "(tag 9, message 3)", or "(collective, message 3)" for the collectives' tag.
std::string Numbered(const MessageKey& key) {
  return absl::StrCat("(", key.tag == kCollectiveTag ? "collective" : absl::StrCat("tag ", key.tag),
                      ", message ", key.sequence, ")");
}

}  // namespace

Dmp::Dmp(Rbm& rbm, uint64_t eager_bytes, uint64_t unit_bytes, uint64_t scratch_max_bytes,
         Counters& counters, Hooks hooks)
    : rbm_(rbm),
      eager_bytes_(eager_bytes),
      unit_bytes_(unit_bytes),
      counters_(counters),
      hooks_(std::move(hooks)),
      scheduler_(unit_bytes),
      scratch_pool_(scratch_max_bytes) {}

void Dmp::SetUnitBytes(uint64_t unit_bytes) {
  unit_bytes_ = std::max<uint64_t>(unit_bytes, 1);
  scheduler_.SetQuantum(unit_bytes_);
}

void Dmp::Submit(std::unique_ptr<CallState> call) {
  CallState& ref = *call;
  ref.comm->tenant = ref.desc.tenant;
  deadlines_.insert({ref.deadline, ref.id});
  std::deque<uint64_t>& queue = ref.comm->queues[ref.desc.rank];
  queue.push_back(ref.id);
  calls_[ref.id] = std::move(call);
  StartQueued(queue);
}

void Dmp::StartQueued(const std::deque<uint64_t>& queue) {
  for (size_t i = 0; i < queue.size(); ++i) {
    CallState& call = *calls_.at(queue[i]);
    if (!call.running) {
      if (i > 0 && !PointToPoint(call)) return;
      for (size_t j = 0; j < i; ++j) {
        if (Conflict(*calls_.at(queue[j]), call)) return;  // it waits for that one
      }
      Start(call);  // marks it ready at most: it stays queued
    }
    if (!PointToPoint(call)) return;
  }
}

void Dmp::Start(CallState& call) {
  Communicator& comm = *call.comm;
  const uint32_t rank = call.desc.rank;
  call.moves.resize(call.program.moves.size());
  const uint64_t scratch_bytes = call.program.scratch_elements * DataTypeSize(call.desc.datatype);
  absl::Status refused = call.withdrawn;  // not OK: it fails before any move starts
  if (scratch_bytes > 0 && refused.ok()) {
    absl::StatusOr<ScratchPool::Buffer> taken = scratch_pool_.Take(scratch_bytes, call.desc.tenant);
    if (taken.ok()) {
      call.scratch = *std::move(taken);
      call.buffers.views[static_cast<size_t>(Slot::kScratch)] = {call.scratch.data.get(),
                                                                 scratch_bytes};
    } else {
      refused = absl::ResourceExhaustedError(absl::StrCat(
          call.program.algorithm, " needs ", scratch_bytes, " bytes of scratch here, but ",
          taken.status().message(), "; choose another algorithm or a smaller count"));
    }
  }
  for (size_t i = 0; i < call.moves.size(); ++i) {
    const Move& move = call.program.moves[i];
    if (move.result.kind == Kind::kNetwork) {
      call.moves[i].sequence = comm.send_sequence[{rank, move.result.peer, move.result.tag}]++;
    } else if (move.Receives()) {
      const Endpoint& net = move.NetworkOperand();
      call.moves[i].sequence = comm.recv_sequence[{net.peer, rank, net.tag}]++;
    }
  }
  call.running = true;
  // A call without its scratch (or withdrawn) fails before any move starts; its messages
  // take their sequence numbers above, so the calls after it still meet theirs.
  if (!refused.ok()) return Doom(call, refused);
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
  for (const std::unique_ptr<CallState>& call : finished_) {
    scratch_pool_.Give(std::move(call->scratch));
  }
  finished_.clear();
  progressing_ = false;
}

bool Dmp::Serve(uint64_t budget) {
  serving_ = true;
  Progress();
  scheduler_.Run(budget);
  Progress();
  serving_ = false;
  return !scheduler_.empty();
}

void Dmp::Activate(uint32_t tenant) {
  if (scheduler_.empty() && !serving_) hooks_.wake();
  active_tenants_.insert(tenant);
}

void Dmp::Defer(uint32_t tenant, std::function<void()> piece) {
  Activate(tenant);
  scheduler_.Push(tenant, unit_bytes_, [this, tenant, piece = std::move(piece)] {
    active_tenants_.insert(tenant);  // a long backlog keeps its tenant active
    piece();
    Progress();
  });
}

void Dmp::Schedule(const CallState& call, uint64_t bytes, std::function<void(CallState&)> work) {
  const uint32_t tenant = call.desc.tenant;
  Activate(tenant);
  scheduler_.Push(tenant, bytes, [this, tenant, id = call.id, work = std::move(work)] {
    active_tenants_.insert(tenant);  // a long backlog keeps its tenant active
    auto it = calls_.find(id);
    if (it != calls_.end() && it->second->running) work(*it->second);
    Progress();
  });
}

bool Dmp::DepsDone(const CallState& call, size_t index) const {
  for (uint32_t dep : call.program.moves[index].deps) {
    if (!call.moves[dep].done) return false;
  }
  return true;
}

void Dmp::Advance(CallState& call) {
  if (!call.failure.ok()) {
    DiscardUnstarted(call);
    if (call.running && !InFlight(call)) Finish(call, call.failure);
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
  if (move.Receives()) {
    return StartReceive(call, index);
  }
  return StartMemoryMove(call, index);
}

absl::Status Dmp::StartMemoryMove(CallState& call, uint32_t index) {
  const Move& move = call.program.moves[index];
  const uint64_t element = DataTypeSize(call.desc.datatype);
  const uint64_t bytes = move.count * element;
  if (bytes == 0) {
    MoveDone(call.id, index);
    return absl::OkStatus();
  }
  if (move.function == Function::kReduce) {
    // Checks the op and datatype once, on nothing, before any unit runs.
    absl::Status status =
        Reduce(call.desc.reduce_op, call.desc.datatype, nullptr, nullptr, nullptr, 0);
    if (!status.ok()) return status;
  }
  std::byte* result = Address(call, move.result);
  const bool reduce = move.function == Function::kReduce;
  const bool in_pieces = !PartlyOverlap(result, Address(call, move.op0), bytes) &&
                         !(reduce && PartlyOverlap(result, Address(call, move.op1), bytes));
  const uint64_t unit = in_pieces ? std::max(element, unit_bytes_ / element * element) : bytes;
  call.moves[index].segments_left = (bytes + unit - 1) / unit;
  for (uint64_t offset = 0; offset < bytes; offset += unit) {
    const uint64_t length = std::min(unit, bytes - offset);
    Schedule(call, length, [this, index, offset, length, element](CallState& call) {
      const Move& move = call.program.moves[index];
      std::byte* to = Address(call, move.result) + offset;
      const std::byte* from = Address(call, move.op0) + offset;
      if (move.function == Function::kCopy) {
        std::memmove(to, from, length);
      } else {
        // Cannot fail: the op and datatype were checked at the start.
        (void)Reduce(call.desc.reduce_op, call.desc.datatype, from,
                     Address(call, move.op1) + offset, to, length / element);
      }
      if (--call.moves[index].segments_left == 0) MoveDone(call.id, index);
    });
  }
  return absl::OkStatus();
}

absl::Status Dmp::StartReceive(CallState& call, uint32_t index) {
  const Move& move = call.program.moves[index];
  const bool network_is_op0 = move.op0.kind == Kind::kNetwork;
  const Endpoint& net = network_is_op0 ? move.op0 : move.op1;
  const Endpoint& memory = network_is_op0 ? move.op1 : move.op0;
  RxTarget target{
      .bytes = move.count * DataTypeSize(call.desc.datatype),
      .call = call.Signature(),
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
  const Endpoint& net = move.NetworkOperand();
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
  if (call.withdrawn.ok()) {
    (status.ok() ? counters_.calls_completed : counters_.calls_failed).fetch_add(1);
  }
  CompletionFn done = std::move(call.done);
  done(Completion{status, call.program.algorithm, call.bytes_sent});
  StartQueued(queue);
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

SteadyTime Dmp::NextDeadline() const {
  return deadlines_.empty() ? SteadyTime::InfiniteFuture() : deadlines_.begin()->first;
}

const CallState* Dmp::Expired(SteadyTime now) const {
  if (deadlines_.empty() || deadlines_.begin()->first > now) return nullptr;
  return calls_.at(deadlines_.begin()->second).get();
}

std::string Dmp::Waiting(const CallState& call) const {
  if (!call.running) {
    const std::deque<uint64_t>& queue = call.comm->queues.at(call.desc.rank);
    const auto ahead = std::find(queue.begin(), queue.end(), call.id) - queue.begin();
    return absl::StrCat("it has not started: it waits behind ", ahead, " earlier calls of rank ",
                        call.desc.rank);
  }
  constexpr int kListed = 3;
  std::string text =
      absl::StrCat(call.moves_done, " of ", call.program.moves.size(), " moves done");
  int listed = 0;
  for (uint32_t i = 0; i < call.next_move && listed < kListed; ++i) {
    if (call.moves[i].done) continue;
    ++listed;
    const Move& move = call.program.moves[i];
    absl::StrAppend(&text, "; move ", i, ": ");
    if (move.result.kind == Kind::kNetwork) {
      const MessageKey key = SendKey(call, i);
      absl::StrAppend(&text, "send to rank ", key.dst, " ", Numbered(key), ": ");
      const auto awaited = awaited_.find(key);
      if (call.comm->local[key.dst]) {
        absl::StrAppend(&text, rbm_.Describe(key));  // the RBM holds a local message
      } else if (awaited != awaited_.end() && awaited->second.call_id == call.id) {
        absl::StrAppend(&text, awaited->second.request == Request::kWritten
                                   ? "asked, waiting for its clear-to-send"
                                   : "its request not yet written");
      } else {
        absl::StrAppend(&text, call.moves[i].segments_left, " segments not yet written");
      }
    } else if (move.Receives()) {
      const MessageKey key = ReceiveKey(call, i);
      absl::StrAppend(&text, "receive from rank ", key.src, " ", Numbered(key), ": ",
                      rbm_.Describe(key));
    } else {
      absl::StrAppend(&text, "memory move, ", call.moves[i].segments_left, " units not yet run");
    }
  }
  return text;
}

std::string Dmp::Running(const Communicator& comm) const {
  constexpr size_t kListed = 8;
  std::vector<std::string> running;
  size_t more = 0;
  for (const auto& [rank, queue] : comm.queues) {
    for (uint64_t id : queue) {
      const CallState& call = *calls_.at(id);
      if (!call.running) break;  // none behind it started
      if (running.size() == kListed) {
        ++more;
        continue;
      }
      running.push_back(absl::StrCat(std::string(CollectiveName(call.desc.collective)), " on rank ",
                                     rank, ": ", Waiting(call)));
    }
  }
  if (more > 0) running.push_back(absl::StrCat("and ", more, " more"));
  return running.empty() ? "none" : absl::StrJoin(running, " | ");
}

}  // namespace cclo::hw::emu
