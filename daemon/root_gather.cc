#include "daemon/root_gather.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/policy.h"
#include "daemon/token.h"
#include "firmware/registry.h"
#include "hw/poe/wire.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {

std::string JoinMessage(const cclo::v1::PeerJoinRequest& request) {
  return absl::StrCat("join|", request.comm_id(), "|", request.rank(), "|", request.size(), "|",
                      request.daemon_address(), "|", request.data_address());
}

absl::Status SameSelection(uint32_t theirs, const std::string& who, const std::string& self) {
  if (theirs == firmware::kSelectionVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(who, " chooses built-in algorithms by selection ", theirs,
                   theirs == 0 ? " (a release from before selections were numbered)" : "", " and ",
                   self, " by selection ", firmware::kSelectionVersion,
                   ": all daemons of a communicator must run releases of one selection"));
}

absl::Status SameWireVersion(uint32_t theirs, const std::string& who, const std::string& self) {
  if (theirs == hw::poe::kWireVersion) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      who, " speaks data wire version ",
      theirs == 0 ? "4 or older (a release from before joins carried it)" : absl::StrCat(theirs),
      " and ", self, " version ", hw::poe::kWireVersion,
      ": all daemons of a communicator must speak one data wire version"));
}

uint32_t JoinTimeoutMs(absl::Duration remaining) {
  // Bounded first, so that nine times it cannot overflow.
  const int64_t remaining_ms =
      std::clamp<int64_t>(absl::ToInt64Milliseconds(remaining), 0, 2 * int64_t{UINT32_MAX});
  return static_cast<uint32_t>(std::clamp<int64_t>(remaining_ms * 9 / 10, 1, UINT32_MAX));
}

absl::Status RootGather::Register(const hw::CommId& id, const hw::CommSecret& secret,
                                  cclo::v1::CommPolicy policy, uint32_t pending_limit) {
  const hw::SteadyTime now = hw::SteadyNow();
  absl::MutexLock lock(&mu_);
  uint32_t pending = 0;
  for (auto it = gathers_.begin(); it != gathers_.end();) {
    const Gather& gather = it->second;
    const bool forgotten =
        gather.waiting == 0 && (gather.failure.ok() ? now - gather.created > kUnusedTokenLifetime
                                                    : now - gather.failed > kFailedGatherLifetime);
    if (forgotten) {
      it = gathers_.erase(it);
      continue;
    }
    pending += gather.policy.tenant() == policy.tenant();
    ++it;
  }
  if (pending >= pending_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant '", policy.tenant(), "' already has ", pending,
        " communicators rooted here that not all ranks joined (its communicators quota); "
        "join them, or wait until unused tokens expire (after ",
        absl::FormatDuration(kUnusedTokenLifetime), ") or failed ones are forgotten (after ",
        absl::FormatDuration(kFailedGatherLifetime), ")"));
  }
  Gather& gather = gathers_[id];
  gather.secret = secret;
  gather.policy = std::move(policy);
  gather.created = now;
  return absl::OkStatus();
}

void RootGather::Fail(Gather& gather, absl::Status why) {
  gather.failure = std::move(why);
  gather.failed = hw::SteadyNow();
}

absl::StatusOr<cclo::v1::PeerJoinResponse> RootGather::Join(
    const cclo::v1::PeerJoinRequest& request, hw::SteadyTime rpc_deadline,
    const std::function<bool()>& caller_left) {
  absl::StatusOr<hw::CommId> parsed = CommIdFromBytes(request.comm_id());
  if (!parsed.ok()) return parsed.status();
  const hw::CommId id = *parsed;
  absl::MutexLock lock(&mu_);
  if (!refusal_.ok()) return refusal_;
  auto found = gathers_.find(id);
  if (found == gathers_.end()) {
    return absl::NotFoundError(
        absl::StrCat("this daemon is not the root of communicator ", hw::CommIdHex(id),
                     " (unknown, all its ranks already joined, or its token expired unused or ",
                     absl::FormatDuration(kFailedGatherLifetime), " after its join failed)"));
  }
  Gather& gather = found->second;
  if (!ProofMatches(gather.secret, JoinMessage(request), request.proof())) {
    return absl::PermissionDeniedError(absl::StrCat(
        "join proof for communicator ", hw::CommIdHex(id), " is wrong: token secret mismatch"));
  }
  // Whoever learned the token (an argv, a shared file) joins nothing of another tenant. A
  // daemon that sends none speaks an older data wire version, refused as such below.
  if (!request.tenant().empty() && request.tenant() != gather.policy.tenant()) {
    return absl::PermissionDeniedError(absl::StrCat("communicator ", hw::CommIdHex(id),
                                                    " is not open to tenant '",
                                                    hw::EscapeControl(request.tenant()), "'"));
  }
  if (request.size() == 0 || request.size() > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator size ", request.size(), " is not in [1, ", kMaxWorldSize, "]"));
  }
  if (request.rank() >= request.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", request.rank(), " is not below size ", request.size()));
  }
  for (const std::string* address : {&request.daemon_address(), &request.data_address()}) {
    if (absl::Status usable = hw::CheckHostPort(*address); !usable.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", request.rank(), "'s daemon gives an unusable ", usable.message()));
    }
  }
  if (request.timeout_ms() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", request.rank(), " joins with timeout_ms 0 (at least 1)"));
  }
  const hw::SteadyTime deadline =
      std::min(rpc_deadline,
               hw::SteadyNow() + std::min(absl::Milliseconds(request.timeout_ms()), longest_wait_));
  const std::string joiner =
      absl::StrCat("rank ", request.rank(), "'s daemon at ", request.daemon_address());
  absl::Status same = SameSelection(request.selection(), joiner, "the root daemon");
  if (same.ok()) same = SameWireVersion(request.wire_version(), joiner, "the root daemon");
  if (!same.ok()) {
    // The communicator cannot form: the ranks waiting for it, and later ones, learn why now.
    Fail(gather, same);
    return same;
  }
  if (gather.size != 0 && gather.size != request.size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", request.rank(), " joins with size ",
                                                   request.size(), " but earlier ranks said ",
                                                   gather.size));
  }
  if (!gather.failure.ok()) return gather.failure;
  if (gather.ranks.count(request.rank())) {
    // One whose daemon gave its join up (its client restarted) leaves at its next check; a
    // new join of it need not wait for that, unless the others have their table already.
    auto holder = gather.callers.find(request.rank());
    if (gather.ranks.size() == gather.size || holder == gather.callers.end() || !*holder->second ||
        !(*holder->second)()) {
      return absl::AlreadyExistsError(absl::StrCat("rank ", request.rank(), " of communicator ",
                                                   hw::CommIdHex(id), " already joined"));
    }
    gather.ranks.erase(request.rank());
  }
  gather.size = request.size();
  gather.callers[request.rank()] = &caller_left;
  cclo::v1::RankInfo& info = gather.ranks[request.rank()];
  info.set_rank(request.rank());
  info.set_daemon_address(request.daemon_address());
  info.set_data_address(request.data_address());
  ++gather.waiting;
  spdlog::debug("rank {} of {} from {} joining at this root", request.rank(), request.size(),
                request.daemon_address());

  auto complete = [&gather]() {
    return !gather.failure.ok() || gather.ranks.size() == gather.size;
  };
  // False when a new join of the rank took its place.
  auto leave = [&gather, &request, &caller_left]() {
    auto own = gather.callers.find(request.rank());
    if (own == gather.callers.end() || own->second != &caller_left) return false;
    gather.callers.erase(own);
    return true;
  };
  // A rank whose daemon gave up the call (its client left, or the connection to it was
  // lost) leaves: the others would form the communicator with a rank no daemon joins, and a
  // new join of that rank would be refused as taken.
  while (!hw::AwaitUntil(
             mu_, absl::Condition(&complete),
             caller_left ? std::min(deadline, hw::SteadyNow() + kCallerLeftCheck) : deadline) &&
         hw::SteadyNow() < deadline) {
    if (!caller_left()) continue;
    if (leave()) gather.ranks.erase(request.rank());
    if (gather.ranks.empty()) gather.size = 0;
    --gather.waiting;
    return absl::CancelledError(absl::StrCat(
        "the call ended before all ranks joined (its daemon gave it up, or the connection was "
        "lost); rank ",
        request.rank(), " may join again"));
  }
  absl::StatusOr<cclo::v1::PeerJoinResponse> result;
  if (gather.ranks.size() == gather.size) {
    cclo::v1::PeerJoinResponse response;
    bool local = true;
    for (const auto& [rank, rank_info] : gather.ranks) {
      *response.add_ranks() = rank_info;
      local = local && rank_info.data_address() == gather.ranks.begin()->second.data_address();
    }
    *response.mutable_policy() = gather.policy;
    response.mutable_policy()->set_transport(local ? kLocalTransport : kTcpTransport);
    result = std::move(response);
  } else {
    if (gather.failure.ok()) {
      // One rank timing out fails the whole gather: the others would wait in vain.
      std::vector<uint32_t> missing;
      for (uint32_t rank = 0; rank < gather.size && missing.size() < kMissingRanksNamed; ++rank) {
        if (!gather.ranks.count(rank)) missing.push_back(rank);
      }
      const size_t unnamed = gather.size - gather.ranks.size() - missing.size();
      Fail(gather, absl::DeadlineExceededError(absl::StrCat(
                       "communicator ", hw::CommIdHex(id), ": only ", gather.ranks.size(), " of ",
                       gather.size, " ranks joined before the deadline; missing ranks ",
                       absl::StrJoin(missing, ","),
                       unnamed > 0 ? absl::StrCat(" and ", unnamed, " more") : "")));
    }
    result = gather.failure;
  }
  leave();
  // A failed gather stays a while, so that ranks arriving late learn why it failed.
  if (--gather.waiting == 0 && gather.failure.ok()) gathers_.erase(id);
  return result;
}

void RootGather::Refuse(absl::Status why) {
  absl::MutexLock lock(&mu_);
  refusal_ = std::move(why);
  for (auto& [id, gather] : gathers_) {
    if (gather.failure.ok()) Fail(gather, refusal_);
  }
}

}  // namespace cclo::daemon
