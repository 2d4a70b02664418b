#include "daemon/tenants.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

size_t Slot(Resource resource) { return static_cast<size_t>(resource); }

/// Whether a getpwuid_r or getgrgid_r answer says only that there is no such entry (the
/// errors its manual lists for that).
bool Absent(int error) {
  return error == 0 || error == ENOENT || error == ESRCH || error == EBADF || error == EPERM;
}

class SystemUserDatabase final : public UserDatabase {
 public:
  std::string UserName(uid_t uid) const override {
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> text;
    const int error = LookUpWithRoom(text, [&](char* buffer, size_t size) {
      return getpwuid_r(uid, &entry, buffer, size, &found);
    });
    if (!Absent(error)) {
      spdlog::warn("cannot look up the user of uid {}: {}; tenants listing users do not match it",
                   uid, std::strerror(error));
    }
    return error == 0 && found != nullptr ? entry.pw_name : "";
  }

  std::vector<std::string> GroupNames(const std::string& user, gid_t primary) const override {
    std::vector<gid_t> gids(64);
    int count = static_cast<int>(gids.size());
    if (user.empty()) {
      gids.assign(1, primary);
    } else {
      while (getgrouplist(user.c_str(), primary, gids.data(), &count) < 0) {
        gids.resize(static_cast<size_t>(count) * 2);
        count = static_cast<int>(gids.size());
      }
      gids.resize(static_cast<size_t>(count));
    }
    std::vector<std::string> names;
    std::vector<char> text;
    for (gid_t gid : gids) {
      group entry{};
      group* found = nullptr;
      const int error = LookUpWithRoom(text, [&](char* buffer, size_t size) {
        return getgrgid_r(gid, &entry, buffer, size, &found);
      });
      if (!Absent(error)) {
        spdlog::warn("cannot look up group {} of user '{}': {}; tenants listing it do not match",
                     gid, user, std::strerror(error));
      } else if (error == 0 && found != nullptr) {
        names.push_back(entry.gr_name);
      }
    }
    return names;
  }
};

}  // namespace

const char* ResourceName(Resource resource) {
  switch (resource) {
    case Resource::kBufferBytes:
      return "buffer_bytes";
    case Resource::kCommunicators:
      return "communicators";
    case Resource::kInflightOps:
      return "inflight_ops";
    case Resource::kSessions:
      return "sessions";
    case Resource::kBuffers:
      return "buffers";
    case Resource::kWaitingCalls:
      return "waiting_calls";
  }
  return "unknown";
}

Lease::Lease(TenantPtr tenant, Resource resource, uint64_t amount)
    : tenant_(std::move(tenant)), resource_(resource), amount_(amount) {}

Lease::Lease(Lease&& other) noexcept
    : tenant_(std::move(other.tenant_)), resource_(other.resource_), amount_(other.amount_) {
  other.amount_ = 0;
}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    tenant_ = std::move(other.tenant_);
    resource_ = other.resource_;
    amount_ = std::exchange(other.amount_, 0);
  }
  return *this;
}

uint64_t Lease::Release() {
  const uint64_t released = tenant_ != nullptr ? amount_ : 0;
  if (released > 0) tenant_->Give(resource_, released);
  tenant_ = nullptr;
  amount_ = 0;
  return released;
}

uint32_t Tenant::weight() const {
  absl::MutexLock lock(&mu_);
  return config_.weight;
}

uint64_t Tenant::Limit(Resource resource) const {
  switch (resource) {
    case Resource::kBufferBytes:
      return config_.quotas.buffer_bytes;
    case Resource::kCommunicators:
      return config_.quotas.communicators;
    case Resource::kInflightOps:
      return config_.quotas.inflight_ops;
    case Resource::kSessions:
      return config_.quotas.sessions;
    case Resource::kBuffers:
      return config_.quotas.buffers;
    case Resource::kWaitingCalls:
      return config_.quotas.waiting_calls;
  }
  return 0;
}

absl::StatusOr<Lease> Tenant::Acquire(Resource resource, uint64_t amount, hw::SteadyTime wait_until,
                                      const StillWanted& still_wanted) {
  absl::MutexLock lock(&mu_);
  uint64_t& used = used_[Slot(resource)];
  auto fits = [this, &used, resource, amount]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    const uint64_t limit = Limit(resource);
    return used <= limit && amount <= limit - used;
  };
  auto fits_or_stopped = [this, &fits]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return fits() || !waits_stopped_.ok();
  };
  auto wanted_now = [this, &still_wanted]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    mu_.Unlock();  // it may look at its session, whose lock comes before this one
    absl::Status wanted = still_wanted();
    mu_.Lock();
    return wanted;
  };
  bool waited = false;
  for (;;) {
    while (!fits() && waits_stopped_.ok() && wait_until > hw::SteadyNow()) {
      waited = true;
      const hw::SteadyTime until =
          still_wanted ? std::min(wait_until, hw::SteadyNow() + kWantedCheck) : wait_until;
      if (hw::AwaitUntil(mu_, absl::Condition(&fits_or_stopped), until) || !still_wanted) {
        continue;
      }
      if (absl::Status wanted = wanted_now(); !wanted.ok()) return wanted;
    }
    // Room that came during a wait goes to a caller still there (one that left would never
    // learn it holds it), and may be gone again once it said so.
    if (!waited || !still_wanted || !fits()) break;
    if (absl::Status wanted = wanted_now(); !wanted.ok()) return wanted;
    if (fits()) break;
  }
  if (!fits() && !waits_stopped_.ok()) return waits_stopped_;
  if (!fits()) {
    ++refused_[Slot(resource)];
    return absl::ResourceExhaustedError(
        absl::StrCat("tenant '", name_, "' quota ", ResourceName(resource), ": limit ",
                     Limit(resource), ", in use ", used, ", asked for ", amount));
  }
  used += amount;
  return Lease(shared_from_this(), resource, amount);
}

void Tenant::StopWaits(absl::Status why) {
  absl::MutexLock lock(&mu_);
  waits_stopped_ = std::move(why);
}

void Tenant::Give(Resource resource, uint64_t amount) {
  absl::MutexLock lock(&mu_);
  uint64_t& used = used_[Slot(resource)];
  used -= std::min(used, amount);
}

void Tenant::CountRefusal(Resource resource) {
  absl::MutexLock lock(&mu_);
  ++refused_[Slot(resource)];
}

std::array<uint64_t, kResourceCount> Tenant::Usage() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

std::array<uint64_t, kResourceCount> Tenant::Refusals() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

uint64_t Tenant::scratch_bytes() const {
  absl::MutexLock lock(&mu_);
  return config_.quotas.scratch_bytes;
}

std::array<uint64_t, kResourceCount> Tenant::Limits() const {
  absl::MutexLock lock(&mu_);
  std::array<uint64_t, kResourceCount> limits;
  for (size_t slot = 0; slot < kResourceCount; ++slot) {
    limits[slot] = Limit(static_cast<Resource>(slot));
  }
  return limits;
}

void Tenant::RecordOpTime(absl::Duration elapsed) {
  absl::MutexLock lock(&mu_);
  op_time_ = (op_time_ * 7 + elapsed) / 8;
}

absl::Duration Tenant::RetryHint() const {
  absl::MutexLock lock(&mu_);
  return std::max(op_time_, absl::Milliseconds(1));
}

bool Tenant::Lists(uid_t uid, const std::string& user,
                   const std::vector<std::string>& groups) const {
  absl::MutexLock lock(&mu_);
  auto has = [](const auto& list, const auto& value) {
    return std::find(list.begin(), list.end(), value) != list.end();
  };
  if (has(config_.uids, uid) || (!user.empty() && has(config_.users, user))) return true;
  return std::any_of(groups.begin(), groups.end(),
                     [&](const std::string& group) { return has(config_.groups, group); });
}

void Tenant::Update(const TenantConfig& config) {
  absl::MutexLock lock(&mu_);
  config_ = config;
}

int LookUpWithRoom(std::vector<char>& buffer, const std::function<int(char*, size_t)>& lookup) {
  constexpr size_t kFirst = 16 << 10, kMost = 1 << 20;
  buffer.resize(std::max(buffer.size(), kFirst));
  int error;
  while ((error = lookup(buffer.data(), buffer.size())) == ERANGE && buffer.size() < kMost) {
    buffer.resize(std::min(buffer.size() * 2, kMost));
  }
  return error;
}

const UserDatabase& SystemUsers() {
  static const SystemUserDatabase* users = new SystemUserDatabase;
  return *users;
}

namespace {

std::vector<TenantPtr> MakeTenants(const Config& config) {
  std::vector<TenantPtr> tenants;
  for (const TenantConfig& tenant : config.tenants) {
    tenants.push_back(std::make_shared<Tenant>(static_cast<uint32_t>(tenants.size()), tenant));
  }
  return tenants;
}

TenantPtr Named(const std::vector<TenantPtr>& tenants, const std::string& name) {
  for (const TenantPtr& tenant : tenants) {
    if (tenant->name() == name) return tenant;
  }
  return nullptr;
}

}  // namespace

TenantStore::TenantStore(const Config& config, const UserDatabase& users)
    : users_(users),
      tenants_(MakeTenants(config)),
      default_tenant_(Named(tenants_, config.default_tenant)),
      default_name_(config.default_tenant) {}

absl::Status TenantStore::Reload(const Config& config) {
  auto names = [](const auto& list, auto name_of) {
    std::string joined;
    for (const auto& entry : list)
      absl::StrAppend(&joined, joined.empty() ? "" : ", ", name_of(entry));
    return joined;
  };
  const std::string running = names(tenants_, [](const TenantPtr& t) { return t->name(); });
  const std::string asked = names(config.tenants, [](const TenantConfig& t) { return t.name; });
  if (running != asked) {
    return absl::InvalidArgumentError(
        absl::StrCat("tenants (", asked, ") differ from the running ones (", running,
                     "); adding, removing, renaming or reordering tenants needs a restart"));
  }
  if (config.default_tenant != default_name_) {
    return absl::InvalidArgumentError(absl::StrCat("default_tenant '", config.default_tenant,
                                                   "' differs from the running '", default_name_,
                                                   "'; changing it needs a restart"));
  }
  for (size_t i = 0; i < tenants_.size(); ++i) tenants_[i]->Update(config.tenants[i]);
  return absl::OkStatus();
}

absl::StatusOr<TenantPtr> TenantStore::Identify(uid_t uid, gid_t gid) const {
  const std::string user = users_.UserName(uid);
  const std::vector<std::string> groups = users_.GroupNames(user, gid);
  for (const TenantPtr& tenant : tenants_) {
    if (tenant->Lists(uid, user, groups)) return tenant;
  }
  if (default_tenant_ != nullptr) return default_tenant_;
  return absl::PermissionDeniedError(
      absl::StrCat("uid ", uid, user.empty() ? "" : absl::StrCat(" (user ", user, ")"),
                   " belongs to no tenant of this daemon, and it refuses unknown callers"));
}

}  // namespace cclo::daemon
