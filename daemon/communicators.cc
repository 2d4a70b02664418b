#include "daemon/communicators.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/status.h"
#include "firmware/registry.h"
#include "hw/poe/wire.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

/// How long past a join's deadline its configuration waits for the engine's answer: the
/// engine fails it at the same deadline, naming the peer daemons whose data sessions were
/// not up, and takes a turn of its loop to say so.
constexpr absl::Duration kEngineAnswerGrace = absl::Seconds(1);

std::string IdBytes(const hw::CommId& id) { return std::string(id.begin(), id.end()); }

/// Why a join of `tenant` may not join communicator `id` here: another tenant's ranks did.
absl::Status NotOpen(const hw::CommId& id, const std::string& tenant) {
  return absl::PermissionDeniedError(absl::StrCat(
      "communicator ", hw::CommIdHex(id), " is not open to tenant '", tenant, "' on this daemon"));
}

/// What a call on communicator `id`, broken for `error`, fails with.
absl::Status Broken(const hw::CommId& id, const std::string& error) {
  return absl::UnavailableError(
      absl::StrCat("communicator ", hw::CommIdHex(id), " is broken: ", error));
}

/// What a join whose client's session ended meanwhile fails with (the client is gone).
absl::Status SessionEndedWhileJoining() {
  return absl::UnavailableError("session ended while joining");
}

std::string ClientExited(const Session& session, uint32_t rank) {
  return absl::StrCat("rank ", rank, " left: its client (pid ", session.credentials().pid,
                      ") exited");
}

}  // namespace

Communicators::Communicators(hw::Device* device, PeerClient* peers, RootGather* root_gather,
                             PolicyStore* policies, std::string self_address)
    : device_(device),
      peers_(peers),
      root_gather_(root_gather),
      policies_(policies),
      self_address_(std::move(self_address)) {}

void Communicators::EngineEvent(const hw::CommunicatorEvent& event) {
  absl::MutexLock lock(&mu_);
  auto found = comms_.find(event.comm);
  if (found == comms_.end() || found->second.state == State::kBroken) return;
  Comm& comm = found->second;
  const std::string reason(event.reason.message());
  // A peer daemon's ranks may leave while the communicator still joins here (another
  // peer's data sessions not up yet): they stay departed once it is ready.
  for (uint32_t rank : event.departed) comm.departed[rank] = reason;
  // A joining communicator's failures end its join, which says why.
  if (event.departed.empty() && comm.state == State::kReady) BreakLocked(event.comm, comm, reason);
}

absl::StatusOr<std::string> Communicators::CreateId(const SessionPtr& session,
                                                    const std::string& label) {
  if (!label.empty() && !ValidLabel(label)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label '", label, "' is not 1 to 64 of a-z, A-Z, 0-9, '_', '.' and '-'"));
  }
  cclo::v1::CommPolicy policy;
  *policy.mutable_policy() = *policies_->Current();
  policy.set_root_address(self_address_);
  policy.set_selection(firmware::kSelectionVersion);
  policy.set_wire_version(hw::poe::kWireVersion);
  policy.set_tenant(session->tenant()->name());
  policy.set_comm_label(label);
  CommToken token = NewToken(self_address_);
  const uint32_t pending_limit =
      session->tenant()->Limits()[static_cast<size_t>(Resource::kCommunicators)];
  if (absl::Status registered =
          root_gather_->Register(token.id, token.secret, std::move(policy), pending_limit);
      !registered.ok()) {
    if (absl::IsResourceExhausted(registered)) {
      session->tenant()->CountRefusal(Resource::kCommunicators);
    }
    return registered;
  }
  return FormatToken(token);
}

absl::StatusOr<Communicators::Joined> Communicators::Join(const SessionPtr& session,
                                                          const std::string& token_text,
                                                          uint32_t rank, uint32_t size,
                                                          hw::SteadyTime deadline) {
  absl::StatusOr<CommToken> token = ParseToken(token_text);
  if (!token.ok()) return token.status();
  if (size == 0 || size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator size ", size, " is not in [1, ", kMaxWorldSize, "]"));
  }
  if (rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " >= size ", size));
  }
  absl::StatusOr<Lease> lease = session->tenant()->Acquire(Resource::kCommunicators, 1);
  if (!lease.ok()) return lease.status();
  const hw::CommId id = token->id;
  const std::string& tenant = session->tenant()->name();
  {
    absl::MutexLock lock(&mu_);
    Comm* record = FindLocked(id, tenant);
    const bool inserted = record == nullptr;
    if (inserted) {
      auto held = comms_.find(id);
      // Another tenant's ranks that the same root has not accepted yet keep none of this
      // tenant's out: that root takes only the token maker's tenant, and each waits for its
      // answer apart. Ranks of a root at another address keep them out (one of the two is
      // not the communicator's root, and this daemon cannot tell which).
      if (held != comms_.end() &&
          (!held->second.table.empty() || held->second.root_address != token->root_address)) {
        return NotOpen(id, tenant);
      }
      record = held == comms_.end() ? &comms_[id] : &contenders_[{id, tenant}];
    }
    Comm& comm = *record;
    if (inserted) {
      comm.secret = token->secret;
      comm.size = size;
      comm.created = absl::Now();
      comm.tenant = tenant;
      comm.root_address = token->root_address;
    } else if (comm.secret != token->secret) {
      return absl::PermissionDeniedError(absl::StrCat("token secret does not match communicator ",
                                                      hw::CommIdHex(id), " joined here"));
    } else if (comm.size != size) {
      return absl::InvalidArgumentError(
          absl::StrCat("size ", size, " disagrees with size ", comm.size, " of ranks joined here"));
    } else if (comm.local_ranks.count(rank)) {
      return absl::AlreadyExistsError(absl::StrCat("rank ", rank, " of communicator ",
                                                   hw::CommIdHex(id), " already joined here"));
    } else if (comm.state == State::kBroken) {
      return Broken(id, comm.error);
    } else if (comm.state == State::kReady) {
      // Its root had every rank: a rank that left, or one of another daemon, cannot join.
      return absl::FailedPreconditionError(
          absl::StrCat("communicator ", hw::CommIdHex(id), " is ready here: its ", comm.size,
                       " ranks joined already, and rank ", rank, " cannot join it again"));
    }
    comm.local_ranks.insert(rank);
    comm.departed.erase(rank);
  }
  auto fail = [&](absl::Status status) {
    absl::MutexLock lock(&mu_);
    LeaveLocked(id, tenant, rank, absl::StrCat("rank ", rank, " failed to join"));
    return status;
  };
  if (absl::Status prepared = device_->PrepareCommunicator(id, token->secret); !prepared.ok()) {
    return fail(prepared);
  }
  cclo::v1::PeerJoinRequest request;
  request.set_version(1);
  request.set_selection(firmware::kSelectionVersion);
  request.set_wire_version(hw::poe::kWireVersion);
  request.set_comm_id(IdBytes(id));
  request.set_rank(rank);
  request.set_size(size);
  request.set_daemon_address(self_address_);
  request.set_data_address(device_->DataAddress());
  request.set_tenant(session->tenant()->name());
  request.set_proof(Proof(token->secret, JoinMessage(request)));
  // The rank waits at the root for the others; a break meanwhile (the operator destroyed
  // the communicator) cancels the wait, and the join fails with its reason.
  PeerClient::Call call;
  {
    absl::MutexLock lock(&mu_);
    Comm& comm = *FindLocked(id, tenant);
    if (comm.state == State::kBroken || session->closed()) call.Cancel();
    comm.joins.emplace(&call, session->id());
  }
  absl::StatusOr<cclo::v1::PeerJoinResponse> response =
      peers_->Join(token->root_address, request, deadline, call);
  std::optional<std::string> broke;
  {
    absl::MutexLock lock(&mu_);
    Comm& comm = *FindLocked(id, tenant);
    comm.joins.erase(&call);
    if (!response.ok() && comm.state == State::kBroken) broke = comm.error;
  }
  if (broke.has_value()) return fail(Broken(id, *broke));
  // This daemon stopping is not the root's answer: the prefix would name the root as if it
  // stopped.
  if (response.status() == ShuttingDown()) return fail(response.status());
  if (!response.ok() && session->closed()) return fail(SessionEndedWhileJoining());
  if (!response.ok()) {
    // The root's own words (or gRPC's), escaped and cut by PeerClient.
    return fail(absl::Status(response.status().code(),
                             absl::StrCat("join at root daemon ", token->root_address,
                                          " failed: ", response.status().message())));
  }
  if (response->ranks_size() != static_cast<int>(size)) {
    return fail(absl::InternalError(
        absl::StrCat("root daemon answered with ", response->ranks_size(), " ranks, not ", size)));
  }
  // The table's positions are its ranks from here on; its addresses go to logs and errors.
  for (int position = 0; position < response->ranks_size(); ++position) {
    const cclo::v1::RankInfo& entry = response->ranks(position);
    if (entry.rank() != static_cast<uint32_t>(position)) {
      return fail(absl::InternalError(
          absl::StrCat("root daemon ", token->root_address, " answered with rank ", entry.rank(),
                       " at position ", position, " of its rank table")));
    }
    for (const std::string* address : {&entry.daemon_address(), &entry.data_address()}) {
      if (absl::Status usable = hw::CheckHostPort(*address); !usable.ok()) {
        return fail(
            absl::InternalError(absl::StrCat("root daemon ", token->root_address, " gives rank ",
                                             position, " an unusable ", usable.message())));
      }
    }
  }
  // The root may run another version: its policy and its built-in selection must be this
  // daemon's too, or the ranks could choose differently; its data wire version too, or
  // the data sessions would be refused.
  const std::string root = absl::StrCat("root daemon ", token->root_address);
  absl::Status same = SameSelection(response->policy().selection(), root, "this daemon");
  if (same.ok()) same = SameWireVersion(response->policy().wire_version(), root, "this daemon");
  if (!same.ok()) return fail(same);
  if (absl::Status usable = ValidatePolicy(response->policy().policy()); !usable.ok()) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("root daemon ", token->root_address,
                     " sent a policy this daemon cannot follow: ", usable.message())));
  }
  absl::Status accepted;
  {
    absl::MutexLock lock(&mu_);
    accepted = AcceptLocked(id, tenant);
    Comm& comm = *FindLocked(id, tenant);
    if (accepted.ok() && comm.table.empty()) {
      comm.table.assign(response->ranks().begin(), response->ranks().end());
      comm.policy = std::make_shared<const cclo::v1::CommPolicy>(response->policy());
    }
  }
  if (!accepted.ok()) return fail(accepted);
  if (absl::Status configured = Configure(id, deadline); !configured.ok()) {
    absl::MutexLock lock(&mu_);
    BreakLocked(id, comms_.at(id), std::string(configured.message()));
    LeaveLocked(id, tenant, rank, std::string(configured.message()));
    return configured;
  }
  absl::MutexLock lock(&mu_);
  Comm& comm = comms_.at(id);
  if (session->closed()) {
    // The client died while joining; EndSession saw no handle, so leave here as it would.
    if (comm.local_ranks.size() > 1) BreakLocked(id, comm, ClientExited(*session, rank));
    LeaveLocked(id, tenant, rank, ClientExited(*session, rank));
    return SessionEndedWhileJoining();
  }
  uint64_t handle = next_handle_++;
  handles_[handle] = {session->id(), session->credentials().pid, id, rank, *std::move(lease)};
  session->AddCommHandle(handle);
  spdlog::info("session {} joined communicator {} as rank {} of {}", session->id(),
               hw::CommIdHex(id), rank, size);
  return Joined{handle, id, comm.table};
}

absl::Status Communicators::Configure(const hw::CommId& id, hw::SteadyTime deadline) {
  hw::CommunicatorConfig config;
  {
    absl::MutexLock lock(&mu_);
    Comm& comm = comms_.at(id);
    if (!comm.configure_started) {
      comm.configure_started = true;
      config.id = id;
      config.secret = comm.secret;
      for (const cclo::v1::RankInfo& info : comm.table) {
        config.ranks.push_back({info.data_address()});
      }
    }
  }
  if (!config.ranks.empty()) {
    // Ready with the engine's answer, on the engine's thread: a break it reports right
    // after is then one of a ready communicator, not left to a join that already ended.
    device_->ConfigureCommunicator(config, deadline, [this, id](absl::Status status) {
      absl::MutexLock lock(&mu_);
      auto found = comms_.find(id);
      if (found == comms_.end()) return;
      Comm& comm = found->second;
      if (status.ok() && comm.state == State::kJoining) comm.state = State::kReady;
      comm.configured = std::move(status);
    });
  }
  absl::MutexLock lock(&mu_);
  const Comm& comm = comms_.at(id);
  auto settled = [this, &comm]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stopping_ || comm.configured.has_value() || comm.state == State::kBroken;
  };
  hw::AwaitUntil(mu_, absl::Condition(&settled), deadline + kEngineAnswerGrace);
  if (stopping_) return ShuttingDown();
  if (comm.state == State::kBroken) return Broken(id, comm.error);
  if (!comm.configured.has_value()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "data sessions of communicator ", hw::CommIdHex(id), " not up before the deadline"));
  }
  return *comm.configured;
}

absl::StatusOr<Member> Communicators::Resolve(const SessionPtr& session, uint64_t handle) const {
  absl::MutexLock lock(&mu_);
  auto found = handles_.find(handle);
  if (found == handles_.end() || found->second.session_id != session->id()) {
    return absl::NotFoundError(absl::StrCat("no communicator handle ", handle, " in this session"));
  }
  const Comm& comm = comms_.at(found->second.comm);
  if (comm.state == State::kBroken) return Broken(found->second.comm, comm.error);
  return Member{found->second.comm, found->second.rank, comm.size, comm.policy};
}

void Communicators::OpStarted(const hw::CommId& id) {
  absl::MutexLock lock(&mu_);
  auto found = comms_.find(id);
  if (found != comms_.end()) ++found->second.ops_in_flight;
}

void Communicators::OpFinished(const hw::CommId& id, uint32_t rank, const absl::Status& status,
                               uint64_t bytes_sent) {
  absl::MutexLock lock(&mu_);
  if (status.ok()) ++ops_completed_;
  auto found = comms_.find(id);
  if (found == comms_.end()) return;
  Comm& comm = found->second;
  // Saturates: an op whose start was not reported must not wrap the count.
  if (comm.ops_in_flight > 0) --comm.ops_in_flight;
  comm.bytes_sent += bytes_sent;
  if (status.ok()) {
    ++comm.ops_completed;
    return;
  }
  ++comm.ops_failed;
  if (comm.departed.contains(rank)) return;
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
    BreakLocked(id, comm, std::string(status.message()));
  }
}

absl::Status Communicators::Destroy(const SessionPtr& session, uint64_t handle) {
  absl::MutexLock lock(&mu_);
  auto found = handles_.find(handle);
  if (found == handles_.end() || found->second.session_id != session->id()) {
    return absl::NotFoundError(absl::StrCat("no communicator handle ", handle, " in this session"));
  }
  Handle destroyed = std::move(found->second);
  handles_.erase(found);
  session->RemoveCommHandle(handle);
  LeaveLocked(destroyed.comm, session->tenant()->name(), destroyed.rank, Destroyed(destroyed.rank));
  return absl::OkStatus();
}

std::string Communicators::Destroyed(uint32_t rank) {
  return absl::StrCat("rank ", rank, " destroyed the communicator");
}

absl::Status Communicators::Forgotten(const hw::CommId& id, uint32_t rank) const {
  absl::MutexLock lock(&mu_);
  auto found = comms_.find(id);
  if (found != comms_.end() && found->second.state == State::kBroken) {
    return Broken(id, found->second.error);
  }
  return absl::UnavailableError(Destroyed(rank));
}

void Communicators::EndSession(const SessionPtr& session) {
  absl::MutexLock lock(&mu_);
  // Its joins waiting for their root's answer end now, not at their deadline: each holds a
  // thread and the tenant's quotas.
  auto cancel_joins = [&session](const Comm& comm) {
    for (const auto& [join, session_id] : comm.joins) {
      if (session_id == session->id()) join->Cancel();
    }
  };
  for (const auto& [id, comm] : comms_) cancel_joins(comm);
  for (const auto& [key, comm] : contenders_) cancel_joins(comm);
  for (uint64_t handle : session->CommHandles()) {
    auto found = handles_.find(handle);
    if (found == handles_.end()) continue;
    Handle ended = std::move(found->second);
    handles_.erase(found);
    const std::string reason = ClientExited(*session, ended.rank);
    Comm& comm = comms_.at(ended.comm);
    // Other local ranks stay, so the engine keeps the communicator: break it so that
    // they and the other daemons learn the rank is gone instead of waiting for it.
    if (comm.local_ranks.size() > 1) BreakLocked(ended.comm, comm, reason);
    LeaveLocked(ended.comm, session->tenant()->name(), ended.rank, reason);
  }
}

void Communicators::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

absl::StatusOr<cclo::v1::AdminDestroyCommunicatorResponse> Communicators::DestroyByOperator(
    const std::string& id_prefix) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::map<hw::CommId, Comm>::const_iterator> found = FindByPrefix(id_prefix);
  if (!found.ok()) return found.status();
  const hw::CommId id = (*found)->first;
  Comm& comm = comms_.at(id);
  cclo::v1::AdminDestroyCommunicatorResponse response;
  response.set_comm_id(hw::CommIdHex(id));
  response.set_tenant(comm.tenant);
  for (uint32_t rank : comm.local_ranks) response.add_local_ranks(rank);
  response.set_ops_failed(comm.ops_in_flight);
  for (auto& [number, handle] : handles_) {
    if (handle.comm != id) continue;
    response.set_quota_released(response.quota_released() +
                                static_cast<uint32_t>(handle.lease.Release()));
  }
  spdlog::warn("communicator {} destroyed through the admin socket", hw::CommIdHex(id));
  BreakLocked(id, comm, "destroyed by the operator");
  // Another tenant's joins waiting beside its ranks for the same root end too: the one the
  // root accepts would form the communicator here.
  for (auto contender = contenders_.lower_bound({id, std::string()});
       contender != contenders_.end() && contender->first.first == id; ++contender) {
    BreakLocked(id, contender->second, "destroyed by the operator");
  }
  return response;
}

size_t Communicators::BreakBusy(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  size_t broken = 0;
  for (auto& [id, comm] : comms_) {
    if (comm.ops_in_flight == 0) continue;
    BreakLocked(id, comm, reason);
    ++broken;
  }
  return broken;
}

uint64_t Communicators::OpsCompleted() const {
  absl::MutexLock lock(&mu_);
  return ops_completed_;
}

std::vector<cclo::v1::CommunicatorInfo> Communicators::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<cclo::v1::CommunicatorInfo> list;
  for (const auto& [id, comm] : comms_) {
    cclo::v1::CommunicatorInfo& info = list.emplace_back();
    info.set_comm_id(hw::CommIdHex(id));
    info.set_size(comm.size);
    for (uint32_t rank : comm.local_ranks) info.add_local_ranks(rank);
    info.set_state(StateName(comm.state));
    info.set_error(comm.error);
    info.set_ops_completed(comm.ops_completed);
    for (const cclo::v1::RankInfo& rank : comm.table) *info.add_ranks() = rank;
    info.set_tenant(comm.tenant);
  }
  return list;
}

absl::StatusOr<cclo::v1::ShowCommunicatorResponse> Communicators::Show(
    const std::string& id_prefix) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::map<hw::CommId, Comm>::const_iterator> found = FindByPrefix(id_prefix);
  if (!found.ok()) return found.status();
  const auto& [id, comm] = **found;
  std::map<uint32_t, const Handle*> holders;
  for (const auto& [number, handle] : handles_) {
    if (handle.comm == id) holders[handle.rank] = &handle;
  }
  cclo::v1::ShowCommunicatorResponse show;
  show.set_comm_id(hw::CommIdHex(id));
  show.set_size(comm.size);
  show.set_state(StateName(comm.state));
  show.set_error(comm.error);
  show.set_tenant(comm.tenant);
  if (comm.policy) *show.mutable_policy() = *comm.policy;
  for (const cclo::v1::RankInfo& rank : comm.table) {
    cclo::v1::MemberInfo& member = *show.add_members();
    member.set_rank(rank.rank());
    member.set_daemon_address(rank.daemon_address());
    member.set_data_address(rank.data_address());
    member.set_local(comm.local_ranks.count(rank.rank()) > 0);
    auto holder = holders.find(rank.rank());
    if (holder != holders.end()) {
      member.set_session_id(holder->second->session_id);
      member.set_client_pid(static_cast<uint32_t>(holder->second->client_pid));
    }
  }
  for (const auto& [rank, reason] : comm.departed) {
    cclo::v1::DepartedRank& departed = *show.add_departed();
    departed.set_rank(rank);
    departed.set_reason(reason);
  }
  show.set_ops_completed(comm.ops_completed);
  show.set_ops_failed(comm.ops_failed);
  show.set_ops_in_flight(comm.ops_in_flight);
  show.set_bytes_sent(comm.bytes_sent);
  show.set_created_unix_ms(static_cast<uint64_t>(absl::ToUnixMillis(comm.created)));
  return show;
}

absl::StatusOr<std::map<hw::CommId, Communicators::Comm>::const_iterator>
Communicators::FindByPrefix(const std::string& id_prefix) const {
  const std::string prefix = absl::AsciiStrToLower(id_prefix);
  if (prefix.empty() || prefix.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator id '", id_prefix, "' is not a hex id or prefix"));
  }
  auto match = comms_.end();
  for (auto it = comms_.begin(); it != comms_.end(); ++it) {
    if (!absl::StartsWith(hw::CommIdHex(it->first), prefix)) continue;
    if (match != comms_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("communicator id prefix '", id_prefix,
                                                     "' matches ", hw::CommIdHex(match->first),
                                                     " and ", hw::CommIdHex(it->first)));
    }
    match = it;
  }
  if (match == comms_.end()) {
    return absl::NotFoundError(absl::StrCat("no communicator ", id_prefix, " on this daemon"));
  }
  return match;
}

const char* Communicators::StateName(State state) {
  switch (state) {
    case State::kJoining:
      return "joining";
    case State::kReady:
      return "ready";
    case State::kBroken:
      return "broken";
  }
  return "unknown";
}

size_t Communicators::Count() const {
  absl::MutexLock lock(&mu_);
  return comms_.size();
}

void Communicators::BreakLocked(const hw::CommId& id, Comm& comm, const std::string& reason) {
  if (comm.state == State::kBroken) return;
  comm.state = State::kBroken;
  comm.error = reason;
  spdlog::warn("communicator {} broken: {}", hw::CommIdHex(id), reason);
  for (const auto& [join, session_id] : comm.joins) join->Cancel();
  if (!comm.device_removed) {
    comm.device_removed = true;
    device_->BreakCommunicator(id, absl::UnavailableError(reason));
  }
}

Communicators::Comm* Communicators::FindLocked(const hw::CommId& id, const std::string& tenant) {
  if (auto contender = contenders_.find({id, tenant}); contender != contenders_.end()) {
    return &contender->second;
  }
  auto found = comms_.find(id);
  return found != comms_.end() && found->second.tenant == tenant ? &found->second : nullptr;
}

absl::Status Communicators::AcceptLocked(const hw::CommId& id, const std::string& tenant) {
  auto contender = contenders_.find({id, tenant});
  if (contender == contenders_.end()) return absl::OkStatus();
  Comm& held = comms_.at(id);
  if (!held.table.empty() || held.root_address != contender->second.root_address) {
    return NotOpen(id, tenant);
  }
  // Their join waits at the same root, which takes one tenant: it refuses them.
  contenders_.emplace(std::pair(id, held.tenant), std::move(held));
  held = std::move(contender->second);
  contenders_.erase(contender);
  return absl::OkStatus();
}

void Communicators::LeaveLocked(const hw::CommId& id, const std::string& tenant, uint32_t rank,
                                const std::string& reason) {
  Comm* found = FindLocked(id, tenant);
  if (found == nullptr) return;
  Comm& comm = *found;
  comm.local_ranks.erase(rank);
  if (!comm.local_ranks.empty()) {
    comm.departed[rank] = reason;
    // The engine keeps the communicator for the others: their calls that need this rank
    // fail with the reason instead of waiting for it until their deadline.
    if (comm.state == State::kReady) {
      device_->DepartLocalRank(id, rank, absl::UnavailableError(reason));
    }
    return;
  }
  const bool remove = !comm.device_removed;
  const bool configured = comm.configure_started;
  if (contenders_.erase({id, tenant}) == 0) comms_.erase(id);
  auto contender = contenders_.lower_bound({id, std::string()});
  if (!comms_.contains(id) && contender != contenders_.end() && contender->first.first == id) {
    // Another tenant's ranks waiting beside these take their place, as if they had come
    // first: the communicator's views and the operator's destroy find them there.
    comms_.emplace(id, std::move(contender->second));
    contenders_.erase(contender);
  }
  // The engine's preparation stays for another tenant's ranks still joining here (or
  // joined), unless these ranks took the communicator to the engine.
  if (remove && (configured || !comms_.contains(id))) {
    device_->RemoveCommunicator(id, absl::UnavailableError(reason));
  }
}

}  // namespace cclo::daemon
