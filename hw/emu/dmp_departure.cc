// The DMP when ranks leave (Communicator::departed): which calls can no longer finish, and
// how a failing call lets go of its moves. A call fails once a move not yet done needs a
// departed rank: a send to it, or a receive from it that is posted (so its message is
// incomplete) or whose message is not all staged. The failing call starts no more moves
// and gives up its posted receives (the RBM discards the rest of their messages), its
// receives not started (once it next advances their messages are received into nothing;
// one of another size is invalid data from its sender) and its sends that wait for their
// receive (a copy of their data still goes if it comes, unless the receiver left); it
// completes when none of its segments is still queued on a live session or landing in its
// memory, so that memory is never touched after completion. Cost: O(moves) per call at
// its start, at each departure and each time a failing call advances; nothing while no
// rank has left.
#include "hw/emu/dmp.h"

namespace cclo::hw::emu {

using Kind = Endpoint::Kind;

absl::Status Dmp::Unreachable(const CallState& call) const {
  const Communicator& comm = *call.comm;
  if (comm.departed.empty()) return absl::OkStatus();
  for (uint32_t i = 0; i < call.moves.size(); ++i) {
    if (call.moves[i].done) continue;
    const Move& move = call.program.moves[i];
    if (move.result.kind == Kind::kNetwork) {
      auto it = comm.departed.find(move.result.peer);
      if (it != comm.departed.end()) return it->second;
    } else if (move.Receives()) {
      const MessageKey key = ReceiveKey(call, i);
      auto it = comm.departed.find(key.src);
      // A posted receive not done yet lacks data that can no longer come.
      if (it != comm.departed.end() && (i < call.next_move || !rbm_.Arrived(key))) {
        return it->second;
      }
    }
  }
  return absl::OkStatus();
}

void Dmp::Doom(CallState& call, const absl::Status& status) {
  if (call.failure.ok()) call.failure = status;
  for (uint32_t i = 0; i < call.next_move; ++i) {
    const Move& move = call.program.moves[i];
    if (call.moves[i].done) continue;
    if (move.result.kind == Kind::kNetwork) {
      call.moves[i].done = LetGo(call, i);
    } else if (move.Receives()) {
      call.moves[i].done = rbm_.Abandon(ReceiveKey(call, i));
    }
  }
  MarkReady(call.id);  // Advance discards the receives it will not start
}

void Dmp::DiscardUnstarted(CallState& call) {
  // They took their sequence numbers: no other call can take their messages, so they are
  // received into nothing (credits and pool buffers come back, and a rendezvous sender
  // gets its clear-to-send), except from ranks that left.
  const uint64_t element = DataTypeSize(call.desc.datatype);
  for (uint32_t i = call.next_move; i < call.moves.size() && call.running; ++i) {
    const Move& move = call.program.moves[i];
    if (call.moves[i].done || !move.Receives()) continue;
    call.moves[i].done = true;
    const MessageKey key = ReceiveKey(call, i);
    if (call.comm->departed.contains(key.src)) continue;
    // A message of another size is invalid, as for a started receive (which may finish
    // the call).
    absl::Status status = rbm_.Post(key, {.bytes = move.count * element, .call = call.Signature()});
    if (!status.ok()) hooks_.invalid(*call.comm, key.src, status);
  }
}

bool Dmp::InFlight(const CallState& call) const {
  for (uint32_t i = 0; i < call.next_move; ++i) {
    if (call.moves[i].done) continue;
    const Move& move = call.program.moves[i];
    const Endpoint& net = move.result.kind == Kind::kNetwork ? move.result : move.NetworkOperand();
    // Nothing is written to or lands from the session of a rank that left.
    if (net.kind == Kind::kNetwork && call.comm->departed.contains(net.peer)) continue;
    return true;
  }
  return false;
}

void Dmp::Depart(Communicator& comm) {
  for (const auto& [rank, queue] : comm.queues) {
    for (uint64_t id : queue) {
      CallState& call = *calls_.at(id);
      if (!call.running) break;  // neither has any call behind it started
      const absl::Status status = call.failure.ok() ? Unreachable(call) : call.failure;
      if (!status.ok()) Doom(call, status);
    }
  }
  // Sends let go of earlier, waiting for a rank that left, wait no more.
  absl::erase_if(awaited_, [&](const auto& entry) {
    return entry.first.comm == comm.id && comm.departed.contains(entry.first.dst);
  });
}

}  // namespace cclo::hw::emu
