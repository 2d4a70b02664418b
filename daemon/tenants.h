// Tenants: who a caller is (from SO_PEERCRED and the user database), what the tenant may
// hold (quotas) and what it holds now. Every charge goes through a Lease, which gives it
// back when it is destroyed, so nothing a session held can stay charged after it ends.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/config.h"
#include "hw/clock.h"

namespace cclo::daemon {

/// What a quota limits.
enum class Resource {
  kBufferBytes,
  kCommunicators,
  kInflightOps,
  kSessions,
  kBuffers,
  kWaitingCalls
};
inline constexpr size_t kResourceCount = 6;

/// The quota's name as the config and messages spell it.
const char* ResourceName(Resource resource);

class Tenant;
using TenantPtr = std::shared_ptr<Tenant>;

/// Holds `amount` of one resource of a tenant until destroyed (or Release()d). Movable.
class Lease {
 public:
  Lease() = default;
  Lease(TenantPtr tenant, Resource resource, uint64_t amount);
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { Release(); }

  /// Gives the amount back now (once); returns it (0 once released).
  uint64_t Release();

 private:
  TenantPtr tenant_;
  Resource resource_ = Resource::kSessions;
  uint64_t amount_ = 0;
};

/// One tenant. Thread-safe.
class Tenant : public std::enable_shared_from_this<Tenant> {
 public:
  /// `index` is the tenant's scheduling class in the engine.
  Tenant(uint32_t index, TenantConfig config)
      : index_(index), name_(config.name), config_(std::move(config)) {}

  uint32_t index() const { return index_; }
  /// The name it was made with: Update leaves it (a reload cannot rename a tenant).
  const std::string& name() const { return name_; }
  uint32_t weight() const;

  /// Whether a waiter still wants room: OK, or why it stops waiting.
  using StillWanted = std::function<absl::Status()>;
  /// Charges `amount` of `resource`. Over quota: RESOURCE_EXHAUSTED naming the tenant, the
  /// quota, its limit, the use and the amount asked; with a `wait_until` in the future it
  /// first waits until that time for room (others' leases ending), unless StopWaits ends
  /// the wait with its reason, or `still_wanted` (asked every kWantedCheck, and once more
  /// when room came after a wait) with its own.
  absl::StatusOr<Lease> Acquire(Resource resource, uint64_t amount,
                                hw::SteadyTime wait_until = hw::SteadyTime::InfinitePast(),
                                const StillWanted& still_wanted = nullptr);
  static constexpr absl::Duration kWantedCheck = absl::Milliseconds(100);
  /// Ends the waits for room of Acquire, now and later, with `why` (not OK): the daemon
  /// stops, and its servers wait for their calls to return.
  void StopWaits(absl::Status why);

  /// What the tenant holds of each resource now, by Resource.
  std::array<uint64_t, kResourceCount> Usage() const;
  /// How many requests each quota refused since the start, by Resource.
  std::array<uint64_t, kResourceCount> Refusals() const;
  /// Counts a request that `resource`'s quota refused where it is held outside the tenant
  /// (the tokens made here that not all ranks joined, for kCommunicators).
  void CountRefusal(Resource resource);
  /// The quota limit of each resource, by Resource.
  std::array<uint64_t, kResourceCount> Limits() const;
  /// The scratch_bytes quota, which the engine enforces.
  uint64_t scratch_bytes() const;

  /// Records how long an op of this tenant took, for the retry hint.
  void RecordOpTime(absl::Duration elapsed);
  /// How long a caller refused for in-flight ops should wait before retrying: the recent
  /// op time of the tenant (exponential average), at least 1 ms.
  absl::Duration RetryHint() const;

  /// Whether the tenant lists `uid`, the user `user` or one of `groups`.
  bool Lists(uid_t uid, const std::string& user, const std::vector<std::string>& groups) const;

  /// New identities, weight and quotas (a reload), not a new name; what is held stays held
  /// even if now over quota.
  void Update(const TenantConfig& config);

 private:
  friend class Lease;
  void Give(Resource resource, uint64_t amount);
  uint64_t Limit(Resource resource) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const uint32_t index_;
  const std::string name_;  ///< read without mu_: config_.name may be replaced by Update
  mutable absl::Mutex mu_;
  TenantConfig config_ ABSL_GUARDED_BY(mu_);
  std::array<uint64_t, kResourceCount> used_ ABSL_GUARDED_BY(mu_) = {};
  std::array<uint64_t, kResourceCount> refused_ ABSL_GUARDED_BY(mu_) = {};
  absl::Duration op_time_ ABSL_GUARDED_BY(mu_) = absl::Milliseconds(1);
  absl::Status waits_stopped_ ABSL_GUARDED_BY(mu_);  ///< OK until StopWaits
};

/// Looks up a user's name and groups; the real one reads the system's user database.
struct UserDatabase {
  virtual ~UserDatabase() = default;
  /// The name of `uid`, or empty if it has none.
  virtual std::string UserName(uid_t uid) const = 0;
  /// The names of the groups `user` belongs to with `primary` as primary group.
  virtual std::vector<std::string> GroupNames(const std::string& user, gid_t primary) const = 0;
};

/// The system's user database (getpwuid_r, getgrouplist, getgrgid_r). An entry it cannot
/// read is logged and counts as absent: a user without name, a group left out.
const UserDatabase& SystemUsers();

/// Runs a getpwuid_r-style lookup (`lookup(buffer, size)` answers 0 or an errno value) in
/// `buffer`, which it sizes: 16 KiB, doubled while the answer is ERANGE up to 1 MiB (a group
/// of thousands of members needs more than 16 KiB). Answers the lookup's last answer.
int LookUpWithRoom(std::vector<char>& buffer, const std::function<int(char*, size_t)>& lookup);

/// All tenants of the config, in matching order. Thread-safe.
class TenantStore {
 public:
  explicit TenantStore(const Config& config, const UserDatabase& users = SystemUsers());

  /// The tenant of a caller: the first whose uids, users or groups list it, else the
  /// default tenant; PERMISSION_DENIED naming the uid when there is none.
  absl::StatusOr<TenantPtr> Identify(uid_t uid, gid_t gid) const;

  std::vector<TenantPtr> All() const { return tenants_; }

  /// Applies `config`'s tenants at run time: identities, weights and quotas. The tenants
  /// (names, in order) and the default tenant must stay as they are (INVALID_ARGUMENT
  /// saying what changed, and nothing is applied); what is held stays held.
  absl::Status Reload(const Config& config);

 private:
  const UserDatabase& users_;
  const std::vector<TenantPtr> tenants_;
  const TenantPtr default_tenant_;  ///< nullptr: unknown callers are refused
  const std::string default_name_;
};

}  // namespace cclo::daemon
