// EmuDevice as the POE's EngineHandler: linking data sessions to communicators (with
// their credit accounts; a link is the session this engine opened, on which it sends, and
// the one the peer opened, on which it receives), marking the ranks of a peer engine whose
// sessions ended as departed, breaking a communicator on invalid data, and expiring
// deadlines. Arriving segments are handled in emu_segments.cc.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "hw/emu/emu_device.h"
#include "spdlog/spdlog.h"

namespace cclo::hw::emu {
namespace {

/// Tenants share the engine (turns of kSharedTurnBytes) while scheduling is fair and two
/// or more tenants had engine work (units queued or run, or data arriving) within the
/// last kSharedHold each. A call that only waits counts for nothing.
constexpr absl::Duration kSharedHold = absl::Milliseconds(50);

/// How a session ends when the peer said BYE (poe::EngineHandler::OnSessionClosed).
bool SaidBye(const absl::Status& end) { return absl::IsCancelled(end) || absl::IsAborted(end); }

/// What the calls that need `ranks` of the peer engine at `address` fail with once they
/// left for `reason` (the peer's words).
absl::Status Left(const std::vector<uint32_t>& ranks, const std::string& address,
                  absl::string_view reason) {
  return absl::UnavailableError(absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                                             absl::StrJoin(ranks, ", "), " on peer daemon ",
                                             address, " left: ", reason));
}

/// What the calls that need the peer engine at `address` fail with once it broke the
/// communicator for `reason` (the peer's words): that peer is not what was lost.
absl::Status BrokeBy(const std::string& address, absl::string_view reason) {
  return absl::UnavailableError(
      absl::StrCat("peer daemon ", address, " broke the communicator: ", reason));
}

}  // namespace

absl::StatusOr<CommSecret> EmuDevice::Secret(const CommId& id) {
  if (const Communicator* comm = Find(id)) return comm->secret;
  std::lock_guard<std::mutex> lock(prepared_mu_);
  auto it = prepared_.find(id);
  if (it == prepared_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown communicator ", CommIdHex(id)));
  }
  return it->second;
}

PeerLink* EmuDevice::LinkOf(poe::Session& session, Communicator** comm) const {
  *comm = Find(session.comm());
  if (*comm == nullptr) return nullptr;
  auto it = (*comm)->peers.find(session.peer_address());
  if (it == (*comm)->peers.end()) return nullptr;
  if (it->second.tx != &session && it->second.rx != &session) return nullptr;
  return &it->second;
}

void EmuDevice::OnAuthenticated(poe::Session& session) {
  if (Communicator* comm = Find(session.comm())) return AdoptIncoming(*comm, session);
  bool prepared = false;
  {
    std::lock_guard<std::mutex> lock(prepared_mu_);
    prepared = prepared_.contains(session.comm());
  }
  if (!prepared) {
    return session.Close(absl::NotFoundError(absl::StrCat(
                             "communicator ", CommIdHex(session.comm()), " was removed")),
                         poe::ByeKind::kLeft);
  }
  parked_[session.comm()].push_back(&session);
}

void EmuDevice::AdoptIncoming(Communicator& comm, poe::Session& session) {
  auto it = comm.peers.find(session.peer_address());
  // The address the peer announced, which proves only that it holds the secret.
  const std::string address = EscapeControl(session.peer_address());
  absl::Status problem = comm.broken;
  if (problem.ok() && it == comm.peers.end()) {
    problem = absl::PermissionDeniedError(absl::StrCat(
        "peer daemon ", address, " hosts no rank of communicator ", CommIdHex(comm.id)));
  } else if (problem.ok() && it->second.rx != nullptr) {
    problem =
        absl::AlreadyExistsError(absl::StrCat("second data session from peer daemon ", address,
                                              " for communicator ", CommIdHex(comm.id)));
  } else if (problem.ok() && comm.departed.contains(it->second.ranks.front())) {
    problem = absl::FailedPreconditionError(
        absl::StrCat("peer daemon ", address, " already left communicator ", CommIdHex(comm.id)));
  }
  if (!problem.ok()) {
    counters_.wire_errors.fetch_add(1);
    spdlog::warn("refusing data session: {}", std::string(problem.message()));
    return session.Close(problem, poe::ByeKind::kLeft);
  }
  it->second.rx = &session;
  session.Admit();
  MaybeLinkUp(comm, it->second);
}

void EmuDevice::OnSessionUp(poe::Session& session) {
  Communicator* comm = nullptr;
  PeerLink* link = LinkOf(session, &comm);
  if (link == nullptr || link->tx != &session) return;
  link->tx_up = true;
  MaybeLinkUp(*comm, *link);
}

void EmuDevice::MaybeLinkUp(Communicator& comm, PeerLink& link) {
  if (!link.tx_up || link.rx == nullptr) return;
  SetLinkState(link, LinkState::kUp);
  link.scratch.resize(config_.segment_bytes);
  link.segment_bytes = link.tx->segment_bytes();
  link.eager_bytes = std::min(config_.eager_max_bytes, link.tx->eager_bytes());
  // Room for what the peer sends eagerly, granted at once (even none: the peer counts the
  // link ready only once it knows).
  const Rbm::Grant grant =
      rbm_.OpenAccount(config_.eager_max_bytes > 0 ? config_.credits_per_peer : 0);
  link.rx_account = grant.account;
  accounts_[link.rx_account] = {comm.id, &link};
  link.Send({.type = poe::SegmentType::kCredit, .comm = comm.id, .total = grant.credits}, nullptr,
            nullptr);
  MaybeReady(comm);
}

void EmuDevice::LinkDown(PeerLink& link) {
  link.tx = nullptr;
  link.rx = nullptr;
  link.tx_up = false;
  if (link.state != LinkState::kLeft) SetLinkState(link, LinkState::kLost);
  link.send_credits = 0;
  accounts_.erase(link.rx_account);
  rbm_.CloseAccount(std::exchange(link.rx_account, 0));
}

void EmuDevice::SetLinkState(PeerLink& link, LinkState state) {
  counters_.links[static_cast<size_t>(link.state)].fetch_sub(1);
  counters_.links[static_cast<size_t>(state)].fetch_add(1);
  link.state = state;
}

void EmuDevice::MaybeReady(Communicator& comm) {
  if (comm.ready || !comm.broken.ok()) return;
  for (const auto& [address, link] : comm.peers) {
    if (link.state != LinkState::kLeft && (!link.up() || !link.granted)) return;
  }
  comm.ready = true;
  configure_deadlines_.erase({comm.configure_deadline, comm.id});
  if (comm.configured) std::exchange(comm.configured, nullptr)(absl::OkStatus());
}

void EmuDevice::ForgetSession(poe::Session& session) {
  for (auto& [id, sessions] : parked_) std::erase(sessions, &session);
}

void EmuDevice::OnSessionClosed(poe::Session& session, const absl::Status& reason) {
  ForgetSession(session);
  Communicator* comm = nullptr;
  PeerLink* link = LinkOf(session, &comm);
  if (link == nullptr) {
    // Perhaps never admitted: the address is the peer's word.
    spdlog::info("data session with {} closed: {}", EscapeControl(session.peer_address()),
                 std::string(reason.message()));
    return;
  }
  const bool ended = SaidBye(reason) || absl::IsUnavailable(reason);
  if (ended && &session == link->tx && link->up() && link->rx != nullptr) {
    // Left or lost, what the peer sent before comes on rx, which ends too (the peer closes
    // both, or its end of tx is gone as well): the ranks depart then, so nothing it sent
    // is dropped unread, or within the handshake timeout (ExpireHalfClosed). Until then
    // what this engine sends it is dropped.
    link->tx = nullptr;
    link->tx_end = reason;
    link->rx_end_deadline = SteadyNow() + config_.handshake_timeout;
    half_closed_.insert({link->rx_end_deadline, comm->id, session.peer_address()});
    // A write that failed in the loop's last flush of a turn lands here after OnTimer:
    // the loop must turn again to learn this deadline before it sleeps.
    engine_->Post([] {});
    return;
  }
  // A lost tx outranks rx's goodbye: the peer says one on rx when it loses its end of tx.
  const bool tx_lost = absl::IsUnavailable(link->tx_end);
  const absl::Status& end = tx_lost && SaidBye(reason) ? link->tx_end : reason;
  const bool bye = SaidBye(end);
  const bool was_up = link->up();
  // Ended by the peer's side without a goodbye: a lost peer engine, counted once per link
  // (not where this engine broke the communicator and closed its sessions itself).
  if (!bye && link->state != LinkState::kLost && link->state != LinkState::kLeft) {
    ++counters_.links_lost;
  }
  const std::string& address = session.peer_address();
  const std::string peer = DescribePeer(*comm, address);
  // A break closes the other session with its own reason; a departure closes it below.
  (&session == link->tx ? link->tx : link->rx) = nullptr;
  const std::string why =
      absl::StrCat(bye ? "peer daemon closed the session: " : "", end.message());
  if (!comm->ready && !was_up) {
    Break(*comm,
          absl::Status(bye ? absl::StatusCode::kUnavailable : reason.code(),
                       absl::StrCat("data session to peer daemon ", peer, " failed: ", why)));
  } else if (end.code() == absl::StatusCode::kInvalidArgument) {
    Break(*comm, absl::UnavailableError(
                     absl::StrCat("invalid data from peer daemon ", peer, ": ", end.message())));
  } else if (!comm->ready && !absl::IsCancelled(end)) {
    Break(*comm, absl::IsAborted(end)
                     ? BrokeBy(address, end.message())
                     : absl::UnavailableError(absl::StrCat("lost peer daemon ", peer, ": ", why)));
  } else {
    // Ready, or the peer's ranks left (a BYE, not a break) while another peer's sessions
    // were not up yet: they ran their part already and depart, and what they sent stays.
    // Those that told their departure (DEPART) keep its reason.
    std::vector<uint32_t> ranks;
    for (uint32_t rank : link->ranks) {
      if (!comm->departed.contains(rank)) ranks.push_back(rank);
    }
    absl::Status gone = absl::UnavailableError(absl::StrCat("lost peer daemon ", peer, ": ", why));
    if (absl::IsAborted(end)) {
      gone = BrokeBy(address, end.message());
    } else if (bye) {
      gone = Left(ranks, address, end.message());
    }
    if (poe::Session* other = link->tx != nullptr ? link->tx : link->rx) {
      other->Close(gone, poe::ByeKind::kLeft);
    }
    LinkDown(*link);
    if (bye) SetLinkState(*link, LinkState::kLeft);
    if (!ranks.empty()) Depart(*comm, ranks, gone);
    MaybeReady(*comm);
  }
  dmp_.Progress();
}

absl::Status EmuDevice::OnDeparture(poe::Session& session, uint32_t rank,
                                    const std::string& reason) {
  Communicator* comm = nullptr;
  PeerLink* link = LinkOf(session, &comm);
  if (link == nullptr) {
    return absl::FailedPreconditionError("depart message on a session of no communicator");
  }
  absl::Status problem;
  if (&session != link->rx) {
    problem = absl::InvalidArgumentError("depart message on the data session this engine sends on");
  } else if (std::find(link->ranks.begin(), link->ranks.end(), rank) == link->ranks.end()) {
    problem = absl::InvalidArgumentError(
        absl::StrCat("depart message for rank ", rank, ", which that peer does not host"));
  } else if (comm->departed.contains(rank)) {
    problem = absl::InvalidArgumentError(
        absl::StrCat("depart message for rank ", rank, ", which already left"));
  }
  if (!problem.ok()) {
    Reject(*comm, session.peer_address(), problem);
    return comm->broken;
  }
  Depart(*comm, {rank}, Left({rank}, session.peer_address(), reason));
  dmp_.Progress();
  return absl::OkStatus();
}

void EmuDevice::TellDepartures() {
  for (auto it = departing_.begin(); it != departing_.end();) {
    const auto& [id, rank] = *it;
    Communicator* comm = Find(id);
    if (comm != nullptr && comm->broken.ok()) {
      auto calls = comm->queues.find(rank);
      if (calls != comm->queues.end() && !calls->second.empty()) {
        ++it;
        continue;
      }
      for (auto& [address, link] : comm->peers) {
        if (link.tx != nullptr) link.tx->Depart(rank, comm->departed.at(rank));
      }
    }
    it = departing_.erase(it);
  }
}

void EmuDevice::ExpireHalfClosed(SteadyTime now) {
  while (!half_closed_.empty() && std::get<0>(*half_closed_.begin()) <= now) {
    const auto [deadline, id, address] = *half_closed_.begin();
    half_closed_.erase(half_closed_.begin());
    Communicator* comm = Find(id);
    if (comm == nullptr) continue;
    auto it = comm->peers.find(address);
    if (it == comm->peers.end()) continue;
    const PeerLink& link = it->second;
    if (link.tx != nullptr || link.rx == nullptr || link.rx_end_deadline != deadline) continue;
    poe::Session& rx = *link.rx;
    const absl::Status reason = absl::UnavailableError(absl::StrCat(
        "the peer's data session was still open ", absl::FormatDuration(config_.handshake_timeout),
        " after this engine's to it ended (", link.tx_end.message(), ")"));
    rx.Close(reason, poe::ByeKind::kLeft);
    OnSessionClosed(rx, reason);  // Close does not report back: the peer's ranks depart
  }
}

void EmuDevice::Depart(Communicator& comm, const std::vector<uint32_t>& ranks,
                       const absl::Status& reason) {
  spdlog::info("communicator {}: {}; calls running: {}", CommIdHex(comm.id),
               std::string(reason.message()), dmp_.Running(comm));
  for (uint32_t rank : ranks) comm.departed[rank] = reason;
  rbm_.DropUnfinished(comm.id, ranks);
  dmp_.Depart(comm);
  events_({comm.id, ranks, reason});
}

void EmuDevice::Break(Communicator& comm, const absl::Status& status, poe::ByeKind bye,
                      uint64_t expired, const absl::Status& expired_status) {
  if (!comm.broken.ok()) return dmp_.FailCalls(comm, comm.broken, expired, expired_status);
  spdlog::log(shutting_down_ ? spdlog::level::info : spdlog::level::warn,
              "communicator {} broken: {}; calls running: {}", CommIdHex(comm.id),
              std::string(status.message()), dmp_.Running(comm));
  End(comm, status, bye, expired, expired_status);
}

void EmuDevice::End(Communicator& comm, const absl::Status& status, poe::ByeKind bye,
                    uint64_t expired, const absl::Status& expired_status) {
  comm.broken = status;
  CloseSessions(comm, status, bye);
  rbm_.Drop(comm.id);
  dmp_.FailCalls(comm, status, expired, expired_status);
  configure_deadlines_.erase({comm.configure_deadline, comm.id});
  if (comm.configured) std::exchange(comm.configured, nullptr)(status);
  events_({comm.id, {}, status});
}

void EmuDevice::CloseSessions(Communicator& comm, const absl::Status& reason, poe::ByeKind bye) {
  for (auto& [address, link] : comm.peers) {
    for (poe::Session* session : {link.tx, link.rx}) {
      if (session != nullptr) session->Close(reason, bye);
    }
    LinkDown(link);
  }
}

void EmuDevice::BreakMidCall(Communicator& comm, const absl::Status& reason) {
  Break(comm, absl::UnavailableError(reason.message()));
}

void EmuDevice::Reject(Communicator& comm, const std::string& address,
                       const absl::Status& problem) {
  counters_.wire_errors.fetch_add(1);
  const absl::Status status = absl::UnavailableError(absl::StrCat(
      "invalid data from peer daemon ", DescribePeer(comm, address), ": ", problem.message()));
  Break(comm, status);
}

void EmuDevice::SizeTurns(SteadyTime now) {
  for (uint32_t tenant : dmp_.TakeActiveTenants()) active_until_[tenant] = now + kSharedHold;
  absl::erase_if(active_until_, [now](const auto& entry) { return entry.second <= now; });
  const bool shared = dmp_.fair() && active_until_.size() > 1;
  if (shared == shared_turns_) return;
  shared_turns_ = shared;
  const uint64_t turn = shared ? kSharedTurnBytes : poe::kTurnBytes;
  dmp_.SetUnitBytes(CurrentUnitBytes());
  // Alone, a tenant's local message goes whole: pieces would only add turns (30-170 us
  // for a 1-4 MiB message here).
  rbm_.SetPieceBytes(shared ? kSharedTurnBytes : Rbm::kWhole);
  engine_->SetTurnBytes(turn);
  counters_.turn_bytes.store(turn);
}

uint64_t EmuDevice::CurrentUnitBytes() const {
  const uint64_t unit = UnitBytes(config_);
  return shared_turns_ ? std::min(unit, kSharedTurnBytes) : unit;
}

SteadyTime EmuDevice::OnTimer(SteadyTime now) {
  while (const CallState* call = dmp_.Expired(now)) {
    const std::string what =
        absl::StrCat(std::string(CollectiveName(call->desc.collective)), " on rank ",
                     call->desc.rank, " of communicator ", CommIdHex(call->comm->id));
    Break(*call->comm, absl::UnavailableError(absl::StrCat(what, " missed its deadline")),
          poe::ByeKind::kBroke, call->id,
          absl::DeadlineExceededError(
              absl::StrCat(what, " did not finish by its deadline: ", dmp_.Waiting(*call))));
  }
  while (!configure_deadlines_.empty() && configure_deadlines_.begin()->first <= now) {
    const CommId id = configure_deadlines_.begin()->second;
    configure_deadlines_.erase(configure_deadlines_.begin());
    Communicator* comm = Find(id);
    if (comm == nullptr) continue;
    std::vector<std::string> missing;
    for (const auto& [address, link] : comm->peers) {
      if (!link.up() || !link.granted) missing.push_back(address);
    }
    Break(*comm, absl::DeadlineExceededError(absl::StrCat(
                     "communicator ", CommIdHex(id), ": data sessions to peer daemons ",
                     absl::StrJoin(missing, ", "), " were not up by the deadline")));
  }
  ExpireHalfClosed(now);
  TellDepartures();
  SizeTurns(now);
  const bool more_work = dmp_.Serve(CurrentUnitBytes());
  ReturnCredits();
  if (more_work) return now;  // look for I/O, then serve the next units
  const SteadyTime configure_next = configure_deadlines_.empty()
                                        ? SteadyTime::InfiniteFuture()
                                        : configure_deadlines_.begin()->first;
  // While turns are short, come back when a tenant stops counting as active.
  SteadyTime restore = SteadyTime::InfiniteFuture();
  if (shared_turns_) {
    for (const auto& [tenant, until] : active_until_) restore = std::min(restore, until);
  }
  const SteadyTime half_closed_next =
      half_closed_.empty() ? SteadyTime::InfiniteFuture() : std::get<0>(*half_closed_.begin());
  return std::min({dmp_.NextDeadline(), configure_next, half_closed_next, restore});
}

}  // namespace cclo::hw::emu
