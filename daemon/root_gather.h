// The root daemon's side of JoinCommunicator: it remembers the communicators it created
// tokens for (with the policy snapshot taken then), checks each joining rank's proof, and
// answers every rank with the rank table and the snapshot once all `size` ranks have
// joined (or fails them at the deadline, once a rank's daemon has another built-in
// selection or data wire version, or once the daemon refuses joins).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cclo/v1/peer.pb.h"
#include "hw/clock.h"
#include "hw/types.h"

namespace cclo::daemon {

/// The largest communicator.
inline constexpr uint32_t kMaxWorldSize = 65536;

/// What a joining rank's proof covers: the join's fields (not the proof itself).
std::string JoinMessage(const cclo::v1::PeerJoinRequest& request);

/// OK if `theirs`, the built-in algorithm selection of the daemon described by `who`, is
/// this daemon's (`self` in the message); else FAILED_PRECONDITION naming both: their
/// ranks could choose different algorithms for the same collective.
absl::Status SameSelection(uint32_t theirs, const std::string& who, const std::string& self);

/// The same for `theirs`, the data wire version of the daemon described by `who`: their
/// data sessions would be refused.
absl::Status SameWireVersion(uint32_t theirs, const std::string& who, const std::string& self);

/// The timeout_ms a joining rank with `remaining` time gives the root: 9/10 of it, so that
/// the root's answer (which ranks are missing) arrives before the rank's own deadline, and
/// at least 1 (the root refuses 0).
uint32_t JoinTimeoutMs(absl::Duration remaining);

class RootGather {
 public:
  /// A token nobody joins with within this time is forgotten.
  static constexpr absl::Duration kUnusedTokenLifetime = absl::Hours(1);
  /// A failed gather answers late ranks with its failure for this long, then is forgotten.
  static constexpr absl::Duration kFailedGatherLifetime = absl::Minutes(1);
  /// A deadline message names at most this many missing ranks.
  static constexpr size_t kMissingRanksNamed = 16;
  /// How often a waiting Join asks whether its caller left.
  static constexpr absl::Duration kCallerLeftCheck = absl::Milliseconds(100);

  /// Waits for a joining rank at most `longest_wait` (this daemon's join timeout), whatever
  /// the rank asks: a wait holds a gRPC thread.
  explicit RootGather(absl::Duration longest_wait) : longest_wait_(longest_wait) {}

  /// Remembers a communicator this daemon is root of and the policy its ranks will choose
  /// by, and forgets tokens that have gone unused for kUnusedTokenLifetime. The policy's
  /// tenant may have at most `pending_limit` gathers here (waiting for ranks, unused, or
  /// failed within kFailedGatherLifetime); beyond that, RESOURCE_EXHAUSTED.
  absl::Status Register(const hw::CommId& id, const hw::CommSecret& secret,
                        cclo::v1::CommPolicy policy, uint32_t pending_limit);

  /// Adds one rank and blocks until every rank joined, or its timeout_ms (at most
  /// longest_wait) passed, or `rpc_deadline`; the answer has the rank table and the policy.
  /// While it waits, `caller_left` (asked every kCallerLeftCheck) says whether the rank's
  /// daemon gave up the call; the rank then leaves the gather, free to join again, and a new
  /// join of it takes its place at once.
  /// Errors: NOT_FOUND (not root of this id), PERMISSION_DENIED (bad proof), INVALID_ARGUMENT
  /// (size disagrees or above kMaxWorldSize, rank out of range, timeout_ms 0), FAILED_PRECONDITION
  /// (this or another rank's daemon has another built-in selection: SameSelection), ALREADY_EXISTS
  /// (rank taken), DEADLINE_EXCEEDED (naming the missing ranks), CANCELLED (the caller left), or
  /// the status given to Refuse.
  absl::StatusOr<cclo::v1::PeerJoinResponse> Join(
      const cclo::v1::PeerJoinRequest& request, hw::SteadyTime rpc_deadline,
      const std::function<bool()>& caller_left = nullptr);

  /// Fails every waiting and later join with `why` (not OK): the daemon drains or stops.
  void Refuse(absl::Status why);

 private:
  struct Gather {
    hw::CommSecret secret{};
    cclo::v1::CommPolicy policy;
    hw::SteadyTime created;
    hw::SteadyTime failed;  ///< when `failure` was set
    uint32_t size = 0;  ///< 0 until the first rank says how many
    std::map<uint32_t, cclo::v1::RankInfo> ranks;
    /// The caller_left of each rank whose Join waits, alive until that Join returns.
    std::map<uint32_t, const std::function<bool()>*> callers;
    int waiting = 0;  ///< Join calls still inside; the last erases a gather that completed
    /// Why the gather cannot complete, OK while it can: a rank timed out, a rank's daemon
    /// has another selection, or the daemon refuses joins. Waiting and later ranks get it.
    absl::Status failure;
  };

  void Fail(Gather& gather, absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration longest_wait_;
  absl::Mutex mu_;
  std::map<hw::CommId, Gather> gathers_ ABSL_GUARDED_BY(mu_);
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);  ///< OK while joins are taken
};

}  // namespace cclo::daemon
