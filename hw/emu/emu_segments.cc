// EmuDevice's side of the wire protocols: every arriving segment is checked against the
// communicator (the ranks it names must be hosted by the sending peer and by this engine,
// in the direction its type travels, it must come on the session the peer sends on, and its
// call must be one a receive could be posted for) before anything touches memory,
// then goes where its type says: eager and rendezvous data to the RBM (which checks credits,
// clear-to-sends and the posted receive), rendezvous requests to the RBM, clear-to-sends to the
// DMP, credits to the link. Anything that does not fit is invalid data from that peer: the
// communicator breaks, other communicators go on. Also sends the RBM's clear-to-sends and the
// credits the RBM gives back (at most one credit segment per link and turn).
#include <utility>

#include "absl/strings/str_cat.h"
#include "firmware/registry.h"
#include "hw/emu/emu_device.h"

namespace cclo::hw::emu {
namespace {

/// The call of a message's first segment (wire.h) is one a receive here could be posted
/// for: a collective on the collectives' tag and point-to-point on another; a root in the
/// communicator of `size` ranks; an algorithm with a place in its collective's table, this
/// engine's, which every daemon of the communicator shares (kSelectionVersion).
/// Point-to-point names none, which Decode checks.
absl::Status CheckSignature(const poe::SegmentHeader& header, uint32_t size) {
  const CallSignature& call = header.call;
  if (header.type != poe::SegmentType::kEagerData && header.type != poe::SegmentType::kRequest) {
    return absl::OkStatus();
  }
  auto refuse = [&](const std::string& problem) {
    return absl::InvalidArgumentError(absl::StrCat(
        poe::SegmentTypeName(header.type), " segment of ", DescribeSignature(call), problem));
  };
  const bool point_to_point = call.collective == Collective::kSend;
  if (point_to_point == (header.tag == kCollectiveTag)) {
    return refuse(absl::StrCat(
        " carries tag ", header.tag,
        point_to_point ? ", which only collectives' messages carry"
                       : absl::StrCat("; collectives' messages carry ", kCollectiveTag)));
  }
  if (HasRoot(call.collective) && call.root >= size) {
    return refuse(
        absl::StrCat(": root ", call.root, " is outside the communicator of ", size, " ranks"));
  }
  if (point_to_point) return absl::OkStatus();
  const uint8_t places = firmware::PlacesIn(call.collective);
  if (call.algorithm >= 1 && call.algorithm <= places) return absl::OkStatus();
  return refuse(absl::StrCat(" names algorithm ", call.algorithm, ", not one of ",
                             std::string(CollectiveName(call.collective)), "'s ", places,
                             " (places 1 to ", places, ")"));
}

}  // namespace

absl::Status EmuDevice::CheckRoute(const Communicator& comm, const std::string& address,
                                   const poe::SegmentHeader& header) const {
  if (header.type == poe::SegmentType::kCredit) return absl::OkStatus();  // names no ranks
  // A clear-to-send travels from the message's receiver back to its sender.
  const bool back = header.type == poe::SegmentType::kClearToSend;
  const uint32_t remote = back ? header.dst : header.src;
  const uint32_t local = back ? header.src : header.dst;
  const std::string type = poe::SegmentTypeName(header.type);
  if (remote >= comm.size() || comm.ranks[remote].data_address != address) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, " segment from rank ", remote, ", which that peer does not host"));
  }
  if (local >= comm.size() || !comm.local[local]) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, " segment for rank ", local, ", which this engine does not host"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::byte*> EmuDevice::OnSegment(poe::Session& session,
                                                const poe::SegmentHeader& header) {
  Communicator* comm = nullptr;
  PeerLink* link = LinkOf(session, &comm);
  if (link == nullptr) {
    return absl::FailedPreconditionError("data segment on a session of no communicator");
  }
  const std::string& address = session.peer_address();
  absl::Status problem = CheckRoute(*comm, address, header);
  if (problem.ok() && header.type != poe::SegmentType::kControl) {
    if (&session != link->rx) {
      problem = absl::InvalidArgumentError(absl::StrCat(
          poe::SegmentTypeName(header.type), " segment on the data session this engine sends on"));
    } else if (!link->up() && header.type != poe::SegmentType::kCredit) {
      // The peer's grant may come before this engine's own session is up; nothing else.
      problem = absl::InvalidArgumentError(
          absl::StrCat(poe::SegmentTypeName(header.type),
                       " segment before this engine's data session to it is up"));
    }
  }
  if (problem.ok()) problem = CheckSignature(header, comm->size());
  if (problem.ok()) {
    switch (header.type) {
      case poe::SegmentType::kCredit:
        if (link->send_credits + header.total > poe::kMaxCredits) {
          problem = absl::InvalidArgumentError(
              absl::StrCat("credit segment raises the eager credits held to ",
                           link->send_credits + header.total, ", above ", poe::kMaxCredits));
        } else {
          link->send_credits += header.total;
          link->granted = true;
          MaybeReady(*comm);
        }
        break;
      case poe::SegmentType::kRequest:
        problem = rbm_.Request(header, link->rx_account);
        break;
      case poe::SegmentType::kClearToSend:
        problem = dmp_.ClearToSend(*comm, header);
        break;
      case poe::SegmentType::kEagerData:
      case poe::SegmentType::kRendezvousData: {
        absl::StatusOr<std::byte*> landing =
            rbm_.Land(header, link->scratch.data(), link->rx_account);
        if (landing.ok()) return landing;
        problem = landing.status();
        break;
      }
      case poe::SegmentType::kControl:  // the session's own
        break;
    }
  }
  if (!problem.ok()) {
    Reject(*comm, address, problem);
    return comm->broken;
  }
  return nullptr;  // no payload
}

absl::Status EmuDevice::OnPayload(poe::Session& session, const poe::SegmentHeader& header) {
  Communicator* comm = nullptr;
  if (LinkOf(session, &comm) == nullptr) {
    return absl::FailedPreconditionError("data payload on a session of no communicator");
  }
  if (header.type == poe::SegmentType::kEagerData ||
      header.type == poe::SegmentType::kRendezvousData) {
    counters_.bytes_received.fetch_add(header.length);
    if (comm->tenant) dmp_.NoteActive(*comm->tenant);
    if (absl::Status status = rbm_.Landed(header); !status.ok()) {
      Reject(*comm, session.peer_address(), status);
      return comm->broken;
    }
  }
  dmp_.Progress();
  return absl::OkStatus();
}

absl::Status EmuDevice::OnPayloadPart(poe::Session& session, const poe::SegmentHeader& header,
                                      uint64_t landed) {
  Communicator* comm = nullptr;
  if (LinkOf(session, &comm) == nullptr) return absl::OkStatus();
  if (header.type != poe::SegmentType::kEagerData &&
      header.type != poe::SegmentType::kRendezvousData) {
    return absl::OkStatus();
  }
  if (comm->tenant) dmp_.NoteActive(*comm->tenant);
  if (absl::Status status = rbm_.LandedPart(header, landed); !status.ok()) {
    Reject(*comm, session.peer_address(), status);
    return comm->broken;
  }
  return absl::OkStatus();
}

void EmuDevice::SendClearToSend(const MessageKey& key, uint64_t total) {
  Communicator* comm = Find(key.comm);
  if (comm == nullptr) return;
  auto it = comm->peers.find(comm->ranks[key.src].data_address);
  if (it == comm->peers.end() || !it->second.up()) return;  // the sender left: nothing comes
  it->second.Send({.type = poe::SegmentType::kClearToSend,
                   .comm = key.comm,
                   .src = key.src,
                   .dst = key.dst,
                   .tag = key.tag,
                   .sequence = key.sequence,
                   .total = total},
                  nullptr, nullptr);
}

void EmuDevice::ReturnCredits() {
  // An open account's link is up (LinkDown closes it).
  for (const auto& [account, credits] : rbm_.TakeCredits()) {
    const auto& [comm, link] = accounts_.at(account);
    link->Send({.type = poe::SegmentType::kCredit, .comm = comm, .total = credits}, nullptr,
               nullptr);
  }
}

}  // namespace cclo::hw::emu
