// Communicators with local ranks: joining (through the root daemon), the per-session
// handles naming a local rank, leaving, breaking, and the view for ccloctl.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cclo/v1/admin.pb.h"
#include "daemon/peer_client.h"
#include "daemon/policy.h"
#include "daemon/root_gather.h"
#include "daemon/sessions.h"
#include "daemon/tenants.h"
#include "daemon/token.h"
#include "hw/clock.h"
#include "hw/device.h"

namespace cclo::daemon {

using CommPolicyPtr = std::shared_ptr<const cclo::v1::CommPolicy>;

/// What an op needs to know of the rank a handle names.
struct Member {
  hw::CommId comm{};
  uint32_t rank = 0;
  uint32_t size = 0;
  CommPolicyPtr policy;  ///< what its ops choose algorithms by
};

class Communicators {
 public:
  /// `self_address` is this daemon's advertised Peer address; `policies` gives the
  /// snapshot communicators rooted here choose by.
  Communicators(hw::Device* device, PeerClient* peers, RootGather* root_gather,
                PolicyStore* policies, std::string self_address);

  /// A new token rooted at this daemon. Its communicator's ranks choose by this daemon's
  /// current policy, seeing the session's tenant and `label` (empty, or ValidLabel; else
  /// INVALID_ARGUMENT).
  absl::StatusOr<std::string> CreateId(const SessionPtr& session, const std::string& label);

  struct Joined {
    uint64_t handle = 0;
    hw::CommId comm{};
    std::vector<cclo::v1::RankInfo> ranks;
  };
  /// Joins `rank` of a `size`-rank communicator for `session`; returns when every rank
  /// joined and all data sessions are up, or fails by `deadline`.
  absl::StatusOr<Joined> Join(const SessionPtr& session, const std::string& token, uint32_t rank,
                              uint32_t size, hw::SteadyTime deadline);

  /// The rank a handle of `session` names; NOT_FOUND for handles it does not own,
  /// UNAVAILABLE (with the reason) once the communicator broke.
  absl::StatusOr<Member> Resolve(const SessionPtr& session, uint64_t handle) const;

  /// Records an op of a local rank that Submit accepted; it counts as in flight until its
  /// OpFinished. Ops calls this once per accepted op and OpFinished once per op, however
  /// it ends.
  void OpStarted(const hw::CommId& comm);

  /// Records the end of an op of `rank` and the bytes it sent; an UNAVAILABLE or
  /// DEADLINE_EXCEEDED op breaks the communicator, unless `rank` left it here (its ops end
  /// for that; the local ranks that stay learn of it from the engine).
  void OpFinished(const hw::CommId& comm, uint32_t rank, const absl::Status& status,
                  uint64_t bytes_sent = 0);

  /// The rank leaves (a collective decision of all ranks, like MPI_Comm_free).
  absl::Status Destroy(const SessionPtr& session, uint64_t handle);
  /// Why the ops of `rank` end once its client destroyed the communicator, those that had
  /// not started then too: "rank R destroyed the communicator".
  static std::string Destroyed(uint32_t rank);
  /// Why an op of `rank` that the engine ended NOT_FOUND ends: the daemon took communicator
  /// `comm` out of the engine after the op found its handle, breaking it (UNAVAILABLE with
  /// the reason, as Resolve's) or as its last rank here destroyed it (UNAVAILABLE Destroyed).
  absl::Status Forgotten(const hw::CommId& comm, uint32_t rank) const;

  /// The session's client is gone: its joins waiting for their root daemon's answer end
  /// (UNAVAILABLE), and its ranks leave. The engine tells the other daemons
  /// in-band (after the data already sent), so their ops that still need a departed rank
  /// fail with the reason while data that already arrived stays usable.
  void EndSession(const SessionPtr& session);

  /// Makes joins that wait for data sessions give up (the daemon is stopping).
  void Stop();

  /// The operator takes the communicator `id_prefix` names (as Show takes it) down on this
  /// daemon: it breaks with "destroyed by the operator" (the engine fails its local ranks'
  /// pending calls and tells the other daemons, and its local ranks' joins still waiting
  /// at the root daemon fail with the reason, those of another tenant's ranks waiting
  /// beside them in `contenders_` too), and the communicators quota its handles
  /// hold goes back to the tenant now. The handles stay, failing every op with the reason,
  /// until their clients destroy them or exit. NOT_FOUND or INVALID_ARGUMENT as for Show.
  absl::StatusOr<cclo::v1::AdminDestroyCommunicatorResponse> DestroyByOperator(
      const std::string& id_prefix);

  /// The engine's news of a communicator (Device::SetEventHandler): departed ranks are
  /// recorded, also while its local ranks still join (a peer daemon's ranks that left before
  /// another peer's data sessions were up), and a break marks a ready one (the engine
  /// answered its configuration OK) broken with the engine's reason unless an op's end
  /// already did (a joining one's join fails with it).
  void EngineEvent(const hw::CommunicatorEvent& event);

  /// Breaks every communicator with an op in flight, for `reason`; returns how many.
  size_t BreakBusy(const std::string& reason);

  /// How many ops of local ranks finished OK since the start (also on communicators since
  /// gone).
  uint64_t OpsCompleted() const;

  std::vector<cclo::v1::CommunicatorInfo> List() const;

  /// The communicator whose hex id is `id_prefix` or starts with it (case-insensitive):
  /// members and which sessions hold the local ranks, state, departed local ranks, op
  /// counters. NOT_FOUND if none matches; INVALID_ARGUMENT if the prefix is empty, not hex
  /// or matches several.
  absl::StatusOr<cclo::v1::ShowCommunicatorResponse> Show(const std::string& id_prefix) const;

  size_t Count() const;

 private:
  enum class State { kJoining, kReady, kBroken };
  struct Comm {
    hw::CommSecret secret{};
    uint32_t size = 0;
    State state = State::kJoining;
    std::string error;
    std::vector<cclo::v1::RankInfo> table;
    CommPolicyPtr policy;
    std::set<uint32_t> local_ranks;
    /// The tenant of the local ranks: a communicator is never shared between tenants here.
    /// Until the root daemon accepted its ranks (`table` filled), a record holds nothing
    /// against another tenant's joins with the same root, which wait beside it in
    /// `contenders_`.
    std::string tenant;
    std::string root_address;  ///< the Peer address its ranks' token names
    bool configure_started = false;
    std::optional<absl::Status> configured;
    bool device_removed = false;
    absl::Time created;  ///< on the wall clock: shown as a date
    /// Ranks that left while this daemon's stayed, with the reason: local ones, and ones
    /// on other daemons that left or were lost with their daemon (the engine tells).
    std::map<uint32_t, std::string> departed;
    uint64_t ops_completed = 0;
    uint64_t ops_failed = 0;
    uint64_t ops_in_flight = 0;
    uint64_t bytes_sent = 0;
    /// The joins of local ranks waiting for the root daemon's answer (Join's own calls,
    /// with their session's id), which a break, or their session's end, cancels.
    std::map<PeerClient::Call*, uint64_t> joins;
  };
  struct Handle {
    uint64_t session_id = 0;
    pid_t client_pid = 0;
    hw::CommId comm{};
    uint32_t rank = 0;
    Lease lease;  ///< on the tenant's communicators quota
  };

  static const char* StateName(State state);
  /// The communicator `id_prefix` names, or why none does.
  absl::StatusOr<std::map<hw::CommId, Comm>::const_iterator> FindByPrefix(
      const std::string& id_prefix) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  /// Marks the communicator broken and takes it out of the engine, which fails its
  /// pending calls and tells the other daemons `reason`; cancels the joins waiting at the
  /// root daemon, which then fail with it.
  void BreakLocked(const hw::CommId& id, Comm& comm, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The record of `tenant`'s local ranks of communicator `id`: its own in `contenders_`,
  /// else the one in `comms_` if it is that tenant's; nullptr if there is none.
  Comm* FindLocked(const hw::CommId& id, const std::string& tenant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The root daemon accepted `tenant`'s ranks of communicator `id`: their record becomes
  /// the communicator's, and one of another tenant in its place, which that root will
  /// refuse, waits in `contenders_` for the answer. PERMISSION_DENIED if another tenant's
  /// ranks were accepted here first, or wait for a root at another address (one of the two
  /// is not the communicator's, and this daemon cannot tell which).
  absl::Status AcceptLocked(const hw::CommId& id, const std::string& tenant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Removes one local rank of `tenant`: while others stay, the engine's calls that need it
  /// fail with `reason`; when none is left, forgets the record, puts one of another tenant
  /// waiting in `contenders_` in its place and, unless there was one (or these ranks took
  /// the communicator to the engine), takes it out of the engine (telling the other
  /// daemons `reason`).
  void LeaveLocked(const hw::CommId& id, const std::string& tenant, uint32_t rank,
                   const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Configure(const hw::CommId& id, hw::SteadyTime deadline);

  hw::Device* const device_;
  PeerClient* const peers_;
  RootGather* const root_gather_;
  PolicyStore* const policies_;
  const std::string self_address_;

  mutable absl::Mutex mu_;
  std::map<hw::CommId, Comm> comms_ ABSL_GUARDED_BY(mu_);
  /// Joins of a communicator whose record in `comms_` is another tenant's and not accepted
  /// by its root yet, by communicator and tenant: a token holder of another tenant, whom
  /// the root refuses, cannot keep the owner's ranks out by joining first. Only while
  /// `comms_` holds a record of that communicator: one of them takes its place when it goes.
  std::map<std::pair<hw::CommId, std::string>, Comm> contenders_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Handle> handles_ ABSL_GUARDED_BY(mu_);
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t ops_completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cclo::daemon
