#include "hw/emu/emu_device.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "firmware/registry.h"
#include "hw/emu/program_check.h"
#include "hw/poe/tcp/engine.h"
#include "hw/poe/wire.h"
#include "spdlog/spdlog.h"

namespace cclo::hw::emu {
namespace {

absl::Status CheckConfig(const EmuConfig& config) {
  if (config.segment_bytes < poe::kMinSegmentBytes ||
      config.segment_bytes > poe::kMaxSegmentBytes || config.segment_bytes % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment_bytes ", config.segment_bytes, " must be a multiple of 8 in [",
                     poe::kMinSegmentBytes, ", ", poe::kMaxSegmentBytes, "]"));
  }
  if (config.rx_pool_bytes < config.segment_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("rx_pool_bytes ", config.rx_pool_bytes,
                                                   " must hold at least one segment of ",
                                                   config.segment_bytes, " bytes"));
  }
  if (config.eager_max_bytes > config.segment_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("eager_max_bytes ", config.eager_max_bytes,
                                                   " exceeds segment_bytes ", config.segment_bytes,
                                                   ": an eager message is one segment"));
  }
  if (config.credits_per_peer > poe::kMaxCredits) {
    return absl::InvalidArgumentError(absl::StrCat("credits_per_peer ", config.credits_per_peer,
                                                   " exceeds the maximum of ", poe::kMaxCredits));
  }
  if (config.rendezvous_waiting_per_peer == 0) {
    return absl::InvalidArgumentError("rendezvous_waiting_per_peer must be at least 1");
  }
  if (config.handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handshake_timeout ", absl::FormatDuration(config.handshake_timeout), " must be positive"));
  }
  if (config.peer_timeout < absl::Milliseconds(poe::kMinPeerTimeoutMs) ||
      config.peer_timeout > absl::Milliseconds(poe::kMaxPeerTimeoutMs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer_timeout ", absl::FormatDuration(config.peer_timeout), " is not in [1s, 24h]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DevicePtr> CreateEmuDevice(const EmuConfig& config) {
  if (absl::Status status = CheckConfig(config); !status.ok()) return status;
  auto device = std::make_unique<EmuDevice>(config);
  if (absl::Status status = device->Start(); !status.ok()) return status;
  return device;
}

EmuDevice::EmuDevice(const EmuConfig& config)
    : config_(config),
      rbm_(
          config.rx_pool_bytes, config.eager_max_bytes, config.segment_bytes,
          config.rendezvous_waiting_per_peer, config.credits_per_peer,
          [this](const MessageKey& key, uint64_t total) { SendClearToSend(key, total); },
          [this](const CommId& id, std::function<void()> piece) {
            // A local message comes from a call here, which set the tenant.
            if (const Communicator* comm = Find(id)) {
              dmp_.Defer(comm->tenant.value_or(0), std::move(piece));
            }
          }),
      dmp_(rbm_, config.eager_max_bytes, UnitBytes(config), config.scratch_max_bytes, counters_,
           Dmp::Hooks{
               .link_for = [](Communicator& comm, uint32_t rank) -> PeerLink* {
                 auto it = comm.peers.find(comm.ranks[rank].data_address);
                 return it != comm.peers.end() && it->second.up() ? &it->second : nullptr;
               },
               .fail = [this](Communicator& comm,
                              absl::Status reason) { BreakMidCall(comm, reason); },
               .invalid =
                   [this](Communicator& comm, uint32_t source, absl::Status problem) {
                     if (comm.local[source]) return BreakMidCall(comm, problem);
                     Reject(comm, comm.ranks[source].data_address, problem);
                   },
               // Any posted task wakes the loop, and every turn ends in OnTimer.
               .wake = [this] { engine_->Post([] {}); },
           }) {}

absl::Status EmuDevice::Start() {
  poe::tcp::TcpEngineConfig engine_config{.listen_host = config_.listen_host,
                                          .port = config_.data_port,
                                          .segment_bytes = config_.segment_bytes,
                                          .eager_bytes = config_.eager_max_bytes,
                                          .handshake_timeout = config_.handshake_timeout,
                                          .peer_timeout = config_.peer_timeout,
                                          .link_bytes_per_second = config_.link_bytes_per_second,
                                          .congestion = config_.tcp_congestion};
  absl::StatusOr<poe::EnginePtr> engine = poe::tcp::CreateTcpEngine(engine_config, this);
  if (!engine.ok()) return engine.status();
  if (absl::Status started = (*engine)->Start(); !started.ok()) return started;
  engine_ = std::move(*engine);
  address_ = engine_->address();
  return absl::OkStatus();
}

EmuDevice::~EmuDevice() {
  if (engine_ == nullptr) return;
  engine_->Post([this] { Shutdown(); });
  engine_->Stop();
  engine_.reset();
}

void EmuDevice::Shutdown() {
  shutting_down_ = true;
  const absl::Status reason = absl::UnavailableError("engine shutting down");
  const absl::Status bye =
      absl::UnavailableError(absl::StrCat("peer daemon ", address_, " shutting down"));
  for (auto& [id, comm] : comms_) {
    CloseSessions(*comm, bye, poe::ByeKind::kLeft);
    Break(*comm, reason);
  }
  for (auto& [id, sessions] : parked_) {
    for (poe::Session* session : sessions) session->Close(bye, poe::ByeKind::kLeft);
  }
  parked_.clear();
  dmp_.Progress();
}

std::string EmuDevice::DataAddress() const { return address_; }

absl::Status EmuDevice::PrepareCommunicator(const CommId& id, const CommSecret& secret) {
  std::lock_guard<std::mutex> lock(prepared_mu_);
  auto [it, inserted] = prepared_.try_emplace(id, secret);
  if (!inserted && it->second != secret) {
    return absl::AlreadyExistsError(
        absl::StrCat("communicator ", CommIdHex(id), " is already prepared with another secret"));
  }
  return absl::OkStatus();
}

void EmuDevice::ConfigureCommunicator(const CommunicatorConfig& config, SteadyTime deadline,
                                      StatusFn done) {
  engine_->Post([this, config, deadline, done = std::move(done)]() mutable {
    Configure(config, deadline, std::move(done));
    dmp_.Progress();
  });
}

void EmuDevice::RemoveCommunicator(const CommId& id, absl::Status reason) {
  PostRemove(id, std::move(reason), poe::ByeKind::kLeft);
}

void EmuDevice::BreakCommunicator(const CommId& id, absl::Status reason) {
  PostRemove(id, std::move(reason), poe::ByeKind::kBroke);
}

void EmuDevice::PostRemove(const CommId& id, absl::Status reason, poe::ByeKind bye) {
  {
    // At once, in the caller's order with PrepareCommunicator: a join retried right after
    // this keeps the preparation it makes before the engine runs the rest.
    std::lock_guard<std::mutex> lock(prepared_mu_);
    prepared_.erase(id);
  }
  engine_->Post([this, id, reason = std::move(reason), bye] {
    Remove(id, reason, bye);
    dmp_.Progress();
  });
}

void EmuDevice::DepartLocalRank(const CommId& id, uint32_t rank, absl::Status reason) {
  engine_->Post([this, id, rank, reason = std::move(reason)] {
    Communicator* comm = Find(id);
    // A rank departs once: a second DEPART would be invalid data to the peers.
    if (comm == nullptr || !comm->broken.ok() || rank >= comm->size() || !comm->local[rank] ||
        comm->departed.contains(rank)) {
      return;
    }
    Depart(*comm, {rank}, reason);
    departing_.insert({id, rank});
    dmp_.Progress();
  });
}

void EmuDevice::Call(const CallDescriptor& call, CallBuffers buffers, SteadyTime deadline,
                     CompletionFn done) {
  engine_->Post(
      [this, call, buffers = std::move(buffers), deadline, done = std::move(done)]() mutable {
        RunCall(call, std::move(buffers), deadline, std::move(done));
        dmp_.Progress();
      });
}

void EmuDevice::Withdraw(const CallDescriptor& call, absl::Status why) {
  if (call.collective == Collective::kSend || call.collective == Collective::kRecv) return;
  engine_->Post([this, call, why = std::move(why)]() mutable {
    RunCall(
        call, {}, SteadyTime::InfiniteFuture(), [](const Completion&) {}, std::move(why));
    dmp_.Progress();
  });
}

void EmuDevice::SetEventHandler(EventFn events) {
  engine_->Post([this, events = std::move(events)]() mutable { events_ = std::move(events); });
}

void EmuDevice::SetScheduling(const Scheduling& scheduling) {
  engine_->Post([this, scheduling] { dmp_.SetScheduling(scheduling); });
}

void EmuDevice::AddPoller(Poller* poller) { engine_->AddPoller(poller); }

DeviceStats EmuDevice::Stats() const {
  DeviceStats stats;
  stats.calls_completed = counters_.calls_completed.load();
  stats.calls_failed = counters_.calls_failed.load();
  stats.bytes_sent = counters_.bytes_sent.load();
  stats.bytes_received = counters_.bytes_received.load();
  stats.rx_pool_bytes_total = rbm_.pool_bytes();
  stats.rx_pool_bytes_used = rbm_.used_bytes();
  stats.rx_pool_bytes_peak = rbm_.peak_bytes();
  stats.rx_pool_bytes_reserved = rbm_.reserved_bytes();
  stats.eager_messages = counters_.eager_messages.load();
  stats.rendezvous_messages = counters_.rendezvous_messages.load();
  stats.eager_fallbacks = counters_.eager_fallbacks.load();
  stats.scratch_bytes_limit = dmp_.scratch_pool().limit_bytes();
  stats.scratch_bytes_used = dmp_.scratch_pool().used_bytes();
  stats.scratch_bytes_kept = dmp_.scratch_pool().kept_bytes();
  stats.scratch_allocations = dmp_.scratch_pool().allocations();
  stats.tenant_scratch = dmp_.scratch_pool().tenants();
  stats.turn_bytes = counters_.turn_bytes.load();
  auto links = [this](LinkState state) {
    return counters_.links[static_cast<size_t>(state)].load();
  };
  stats.sessions_up = links(LinkState::kUp);
  stats.sessions_connecting = links(LinkState::kConnecting);
  stats.sessions_left = links(LinkState::kLeft);
  stats.sessions_lost = links(LinkState::kLost);
  stats.sessions_lost_total = counters_.links_lost.load();
  stats.wire_errors = counters_.wire_errors.load() + engine_->wire_errors();
  stats.accept_pauses = engine_->accept_pauses();
  return stats;
}

Communicator* EmuDevice::Find(const CommId& id) const {
  auto it = comms_.find(id);
  return it == comms_.end() ? nullptr : it->second.get();
}

std::string EmuDevice::DescribePeer(const Communicator& comm, const std::string& address) const {
  auto it = comm.peers.find(address);
  const std::vector<uint32_t> none;
  const std::vector<uint32_t>& ranks = it == comm.peers.end() ? none : it->second.ranks;
  return absl::StrCat(address, " (rank", ranks.size() == 1 ? " " : "s ", absl::StrJoin(ranks, ", "),
                      ")");
}

void EmuDevice::Configure(const CommunicatorConfig& config, SteadyTime deadline, StatusFn done) {
  const std::string hex = CommIdHex(config.id);
  if (Find(config.id) != nullptr) {
    return done(
        absl::AlreadyExistsError(absl::StrCat("communicator ", hex, " is already configured")));
  }
  auto comm = std::make_unique<Communicator>();
  comm->id = config.id;
  comm->secret = config.secret;
  comm->ranks = config.ranks;
  comm->local.assign(config.ranks.size(), false);
  for (uint32_t rank = 0; rank < config.ranks.size(); ++rank) {
    const std::string& address = config.ranks[rank].data_address;
    if (address.empty()) {
      return done(absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " of communicator ", hex, " has no data address")));
    }
    if (address == address_) {
      comm->local[rank] = true;
    } else {
      comm->peers[address].ranks.push_back(rank);
    }
  }
  if (std::find(comm->local.begin(), comm->local.end(), true) == comm->local.end()) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("no rank of communicator ", hex, " is hosted at this engine's data address ",
                     address_, " (", config.ranks.size(), " ranks)")));
  }
  Communicator& ref = *comm;
  comms_[config.id] = std::move(comm);
  counters_.links[static_cast<size_t>(LinkState::kConnecting)] += ref.peers.size();
  ref.configured = std::move(done);
  ref.configure_deadline = deadline;
  configure_deadlines_.insert({deadline, ref.id});
  // Peers' sessions that waited for the communicator first, so that a failed connect,
  // which breaks it, closes them too.
  if (auto it = parked_.find(ref.id); it != parked_.end()) {
    std::vector<poe::Session*> sessions = std::move(it->second);
    parked_.erase(it);
    for (poe::Session* session : sessions) AdoptIncoming(ref, *session);
  }
  for (auto& [address, link] : ref.peers) {
    absl::StatusOr<poe::Session*> session = engine_->Connect(ref.id, ref.secret, address);
    if (!session.ok()) {
      return Break(
          ref, absl::Status(session.status().code(),
                            absl::StrCat("communicator ", hex, ": ", session.status().message())));
    }
    link.tx = *session;
  }
  MaybeReady(ref);
}

void EmuDevice::Remove(const CommId& id, absl::Status reason, poe::ByeKind bye) {
  if (reason.ok()) {
    reason = absl::UnavailableError(absl::StrCat("communicator ", CommIdHex(id), " was removed"));
  }
  if (auto it = parked_.find(id); it != parked_.end()) {
    std::vector<poe::Session*> sessions = std::move(it->second);
    parked_.erase(it);
    for (poe::Session* session : sessions) session->Close(reason, bye);
  }
  if (Communicator* comm = Find(id)) {
    // Its ranks here are done with it: a warning (Break's) only where calls are cut off.
    const bool idle = std::all_of(comm->queues.begin(), comm->queues.end(),
                                  [](const auto& rank_calls) { return rank_calls.second.empty(); });
    if (comm->broken.ok() && idle) {
      spdlog::info("communicator {} removed: {}", CommIdHex(id), std::string(reason.message()));
      End(*comm, reason, bye);
    } else {
      Break(*comm, reason, bye);
    }
    for (const auto& [address, link] : comm->peers) {
      counters_.links[static_cast<size_t>(link.state)].fetch_sub(1);
    }
    comms_.erase(id);
  }
}

absl::Status EmuDevice::CheckCall(const CallDescriptor& call, Communicator** out) const {
  Communicator* comm = Find(call.comm);
  if (comm == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown communicator ", CommIdHex(call.comm)));
  }
  if (!comm->broken.ok()) return comm->broken;
  if (!comm->ready) {
    return absl::FailedPreconditionError(
        absl::StrCat("communicator ", CommIdHex(call.comm), " is still being configured"));
  }
  if (call.rank >= comm->size() || !comm->local[call.rank]) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", call.rank, " of communicator ", CommIdHex(call.comm), " (",
                     comm->size(), " ranks) is not hosted by this engine at ", address_));
  }
  *out = comm;
  return absl::OkStatus();
}

void EmuDevice::RunCall(const CallDescriptor& call, CallBuffers buffers, SteadyTime deadline,
                        CompletionFn done, absl::Status withdrawn) {
  Communicator* comm = nullptr;
  absl::Status status = CheckCall(call, &comm);
  absl::StatusOr<Program> program =
      status.ok() ? firmware::Generate(call, comm->size()) : absl::StatusOr<Program>(status);
  if (program.ok() && withdrawn.ok()) status = CheckProgram(*program, call, buffers, comm->size());
  if (!program.ok()) status = program.status();
  if (!status.ok()) {
    // A withdrawn call that cannot take its place was never counted as a call.
    if (withdrawn.ok()) counters_.calls_failed.fetch_add(1);
    return done(Completion{status, program.ok() ? program->algorithm : ""});
  }
  auto state = std::make_unique<CallState>();
  state->id = next_call_id_++;
  state->desc = call;
  state->buffers = std::move(buffers);
  state->program = *std::move(program);
  state->deadline = deadline;
  state->done = std::move(done);
  state->comm = comm;
  state->withdrawn = std::move(withdrawn);
  dmp_.Submit(std::move(state));
}

}  // namespace cclo::hw::emu
