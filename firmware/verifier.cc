#include "firmware/verifier.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hw/emu/reduce.h"

namespace cclo::firmware {
namespace {

using hw::Endpoint;
using Kind = hw::Endpoint::Kind;

std::string At(uint32_t rank, size_t move) { return absl::StrCat("rank ", rank, " move ", move); }

struct Access {
  size_t move;
  hw::Slot slot;
  uint64_t begin;
  uint64_t end;  // one past the last element
  bool write;
};

bool Overlap(const Access& a, const Access& b) {
  return a.slot == b.slot && a.begin < b.end && b.begin < a.end;
}

std::vector<Access> MemoryAccesses(const hw::Move& move, size_t index) {
  std::vector<Access> accesses;
  auto note = [&](const Endpoint& endpoint, bool write) {
    if (endpoint.kind == Kind::kMemory && move.count > 0) {
      accesses.push_back(
          {index, endpoint.slot, endpoint.offset, endpoint.offset + move.count, write});
    }
  };
  note(move.op0, false);
  note(move.op1, false);
  note(move.result, true);
  return accesses;
}

// The checks of one move that need nothing but the move, its rank and the buffers.
absl::Status CheckMove(const RankRun& run, uint32_t rank, uint32_t world_size, size_t index) {
  const hw::Move& move = run.program.moves[index];
  const std::string at = At(rank, index);
  for (uint32_t dep : move.deps) {
    if (dep >= index) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, " depends on move ", dep, ", which is not an earlier move"));
    }
  }
  const bool reduce = move.function == hw::Function::kReduce;
  if (move.function != hw::Function::kCopy && !reduce) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, " has unknown function value ", static_cast<int>(move.function)));
  }
  if (move.op0.kind == Kind::kNone || (reduce && move.op1.kind == Kind::kNone)) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, reduce ? " is a reduce" : " is a copy", " with a missing operand"));
  }
  if (!reduce && move.op1.kind != Kind::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(at, " is a copy with an op1"));
  }
  int network = 0;
  for (const Endpoint* endpoint : {&move.op0, &move.op1, &move.result}) {
    if (endpoint->kind == Kind::kNetwork) {
      ++network;
      if (endpoint->peer >= world_size || endpoint->peer == rank) {
        return absl::InvalidArgumentError(absl::StrCat(at, " names network peer ", endpoint->peer,
                                                       ", not another rank of ", world_size));
      }
    } else if (endpoint->kind != Kind::kNone && endpoint->kind != Kind::kMemory) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, " has unknown endpoint kind value ", static_cast<int>(endpoint->kind)));
    } else if (endpoint->kind == Kind::kMemory) {
      const size_t slot = static_cast<size_t>(endpoint->slot);
      if (slot >= hw::kSlotCount) {
        return absl::InvalidArgumentError(absl::StrCat(at, " names slot value ", slot));
      }
      const uint64_t elements = run.buffers[slot].size() / hw::DataTypeSize(run.call.datatype);
      if (endpoint->offset > elements || move.count > elements - endpoint->offset) {
        return absl::InvalidArgumentError(absl::StrCat(at, " accesses elements [", endpoint->offset,
                                                       ", +", move.count, ") of slot ", slot,
                                                       ", which holds ", elements));
      }
    }
  }
  if (network > 1) {
    return absl::InvalidArgumentError(absl::StrCat(at, " has ", network, " network endpoints"));
  }
  const std::vector<Access> accesses = MemoryAccesses(move, index);
  for (const Access& write : accesses) {
    for (const Access& read : accesses) {
      if (write.write && !read.write && Overlap(read, write) &&
          (read.begin != write.begin || read.end != write.end)) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, " reads and writes overlapping but different ranges of slot ",
                         static_cast<int>(read.slot)));
      }
    }
  }
  return absl::OkStatus();
}

// Two moves that touch overlapping memory, one of them writing, must be ordered by deps.
absl::Status CheckHazards(const hw::Program& program, uint32_t rank) {
  const size_t n = program.moves.size();
  const size_t words = (n + 63) / 64;
  std::vector<std::vector<uint64_t>> reach(n, std::vector<uint64_t>(words));
  std::vector<Access> accesses;
  for (size_t j = 0; j < n; ++j) {
    for (uint32_t dep : program.moves[j].deps) {
      for (size_t w = 0; w < words; ++w) reach[j][w] |= reach[dep][w];
      reach[j][dep / 64] |= uint64_t{1} << (dep % 64);
    }
    for (const Access& access : MemoryAccesses(program.moves[j], j)) {
      for (const Access& earlier : accesses) {
        if (earlier.move == j || !Overlap(earlier, access)) continue;
        if (!earlier.write && !access.write) continue;
        if ((reach[j][earlier.move / 64] >> (earlier.move % 64) & 1) == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              At(rank, j), " ", access.write ? "writes" : "reads", " elements [", access.begin,
              ", ", access.end, ") of slot ", static_cast<int>(access.slot), " that move ",
              earlier.move, " ", earlier.write ? "writes" : "reads", " without depending on it"));
        }
      }
      accesses.push_back(access);
    }
  }
  return absl::OkStatus();
}

struct Message {
  std::vector<std::byte> data;
  uint64_t count;
  size_t element_size;
  size_t move;  // the sending move
};

// (src, dst, tag, sequence number on that route)
using Route = std::tuple<uint32_t, uint32_t, uint32_t, uint64_t>;

class Simulation {
 public:
  explicit Simulation(std::vector<RankRun>& runs) : runs_(runs), states_(runs.size()) {
    for (size_t r = 0; r < runs.size(); ++r) {
      states_[r].completed.assign(runs[r].program.moves.size(), false);
      states_[r].sequence.assign(runs[r].program.moves.size(), 0);
    }
  }

  absl::Status Run();

 private:
  struct RankState {
    size_t next = 0;                // next move to start
    std::vector<size_t> in_flight;  // started, not completed, in start order
    std::vector<bool> completed;
    std::vector<uint64_t> sequence;  // per move: its message number on its route
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> sent, received;  // (peer, tag) -> next
  };

  bool Ready(uint32_t rank, size_t index) const {
    for (uint32_t dep : runs_[rank].program.moves[index].deps) {
      if (!states_[rank].completed[dep]) return false;
    }
    return true;
  }
  void Start(uint32_t rank, size_t index);
  absl::StatusOr<bool> TryComplete(uint32_t rank, size_t index);
  std::byte* Memory(uint32_t rank, const Endpoint& endpoint) {
    RankRun& run = runs_[rank];
    return run.buffers[static_cast<size_t>(endpoint.slot)].data() +
           endpoint.offset * hw::DataTypeSize(run.call.datatype);
  }
  absl::Status Stuck() const;

  std::vector<RankRun>& runs_;
  std::vector<RankState> states_;
  std::map<Route, Message> messages_;  // sent, not yet received
  std::set<Route> posted_;             // receives started, their message not yet sent
};

void Simulation::Start(uint32_t rank, size_t index) {
  RankState& state = states_[rank];
  const hw::Move& move = runs_[rank].program.moves[index];
  // Sequence numbers follow start order, which is program order.
  if (move.result.kind == Kind::kNetwork) {
    state.sequence[index] = state.sent[{move.result.peer, move.result.tag}]++;
  }
  for (const Endpoint* operand : {&move.op0, &move.op1}) {
    if (operand->kind == Kind::kNetwork) {
      state.sequence[index] = state.received[{operand->peer, operand->tag}]++;
      posted_.insert({operand->peer, rank, operand->tag, state.sequence[index]});
    }
  }
  state.in_flight.push_back(index);
}

absl::StatusOr<bool> Simulation::TryComplete(uint32_t rank, size_t index) {
  RankRun& run = runs_[rank];
  const hw::Move& move = run.program.moves[index];
  const size_t element_size = hw::DataTypeSize(run.call.datatype);
  const uint64_t bytes = move.count * element_size;
  const Route route = {rank, move.result.peer, move.result.tag, states_[rank].sequence[index]};
  // Rendezvous: a send waits until its receive has started.
  if (move.result.kind == Kind::kNetwork && !posted_.contains(route)) return false;

  // Operands: memory, or the matching message, which must have arrived.
  std::array<const std::byte*, 2> operands = {nullptr, nullptr};
  auto network_in = messages_.end();
  for (int i = 0; i < 2; ++i) {
    const Endpoint& operand = i == 0 ? move.op0 : move.op1;
    if (operand.kind == Kind::kMemory) operands[i] = Memory(rank, operand);
    if (operand.kind != Kind::kNetwork) continue;
    network_in = messages_.find({operand.peer, rank, operand.tag, states_[rank].sequence[index]});
    if (network_in == messages_.end()) return false;
    const Message& message = network_in->second;
    if (message.count != move.count || message.element_size != element_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(At(rank, index), " receives ", move.count, " elements of ", element_size,
                       " bytes but the matching send (", At(operand.peer, message.move),
                       ") carries ", message.count, " of ", message.element_size));
    }
    operands[i] = message.data.data();
  }

  // The result: straight into memory, or into a message.
  std::vector<std::byte> staged;
  std::byte* out = nullptr;
  if (move.result.kind == Kind::kMemory) {
    out = Memory(rank, move.result);
  } else {
    staged.resize(bytes);
    out = staged.data();
  }
  if (move.function == hw::Function::kCopy) {
    if (bytes > 0) std::memmove(out, operands[0], bytes);
  } else if (absl::Status reduced = hw::emu::Reduce(run.call.reduce_op, run.call.datatype,
                                                    operands[0], operands[1], out, move.count);
             !reduced.ok()) {
    return reduced;
  }
  if (move.result.kind == Kind::kNetwork) {
    posted_.erase(route);
    messages_[route] = Message{std::move(staged), move.count, element_size, index};
  }
  if (network_in != messages_.end()) messages_.erase(network_in);
  states_[rank].completed[index] = true;
  return true;
}

absl::Status Simulation::Stuck() const {
  std::vector<std::string> blocked;
  for (uint32_t rank = 0; rank < runs_.size(); ++rank) {
    const RankState& state = states_[rank];
    const std::vector<hw::Move>& moves = runs_[rank].program.moves;
    std::vector<std::string> waits;
    for (size_t index : state.in_flight) {
      const hw::Move& move = moves[index];
      if (move.result.kind == Kind::kNetwork) {
        waits.push_back(absl::StrCat("move ", index, " waits for rank ", move.result.peer,
                                     " to receive message ", state.sequence[index], " tag ",
                                     move.result.tag));
        continue;
      }
      const Endpoint& from = move.NetworkOperand();
      waits.push_back(absl::StrCat("move ", index, " waits for message ", state.sequence[index],
                                   " from rank ", from.peer, " tag ", from.tag));
    }
    if (state.next < moves.size()) {
      std::vector<uint32_t> pending;
      for (uint32_t dep : moves[state.next].deps) {
        if (!state.completed[dep]) pending.push_back(dep);
      }
      waits.push_back(
          absl::StrCat("move ", state.next, " waits for moves ", absl::StrJoin(pending, ",")));
    }
    if (!waits.empty()) {
      blocked.push_back(absl::StrCat("rank ", rank, " (", absl::StrJoin(waits, "; "), ")"));
    }
  }
  constexpr size_t kShown = 4;
  const size_t more = blocked.size() > kShown ? blocked.size() - kShown : 0;
  blocked.resize(blocked.size() - more);
  return absl::InvalidArgumentError(
      absl::StrCat("deadlock: ", absl::StrJoin(blocked, ", "),
                   more > 0 ? absl::StrCat(" and ", more, " more ranks") : ""));
}

absl::Status Simulation::Run() {
  for (bool progress = true; progress;) {
    progress = false;
    for (uint32_t rank = 0; rank < runs_.size(); ++rank) {
      RankState& state = states_[rank];
      while (state.next < runs_[rank].program.moves.size() && Ready(rank, state.next)) {
        Start(rank, state.next++);
        progress = true;
      }
      // Newest first, so that completion order differs from start order.
      for (size_t i = state.in_flight.size(); i-- > 0;) {
        absl::StatusOr<bool> completed = TryComplete(rank, state.in_flight[i]);
        if (!completed.ok()) return completed.status();
        if (*completed) {
          state.in_flight.erase(state.in_flight.begin() + static_cast<ptrdiff_t>(i));
          progress = true;
        }
      }
    }
  }
  for (const RankState& state : states_) {
    if (!state.in_flight.empty() || state.next < state.completed.size()) return Stuck();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Execute(std::vector<RankRun>& runs) {
  const auto world_size = static_cast<uint32_t>(runs.size());
  for (uint32_t rank = 0; rank < world_size; ++rank) {
    RankRun& run = runs[rank];
    if (run.call.rank != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("runs[", rank, "] carries a call for rank ", run.call.rank));
    }
    if (static_cast<uint8_t>(run.call.datatype) > static_cast<uint8_t>(hw::DataType::kFloat64) ||
        static_cast<uint8_t>(run.call.reduce_op) > static_cast<uint8_t>(hw::ReduceOp::kMin)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " has an unknown datatype or reduce op value"));
    }
    const uint64_t scratch_limit =
        run.call.count > UINT64_MAX / world_size ? UINT64_MAX : run.call.count * world_size;
    if (run.program.scratch_elements > scratch_limit) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " asks for ",
                                                     run.program.scratch_elements,
                                                     " scratch elements; at most ", scratch_limit));
    }
    runs[rank].buffers[static_cast<size_t>(hw::Slot::kScratch)].assign(
        run.program.scratch_elements * hw::DataTypeSize(run.call.datatype), std::byte{0xA5});
    for (size_t index = 0; index < run.program.moves.size(); ++index) {
      if (absl::Status status = CheckMove(run, rank, world_size, index); !status.ok()) {
        return status;
      }
    }
    if (absl::Status status = CheckHazards(run.program, rank); !status.ok()) return status;
  }
  return Simulation(runs).Run();
}

}  // namespace cclo::firmware
