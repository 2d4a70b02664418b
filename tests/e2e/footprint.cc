#include "tests/e2e/footprint.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace cclo::testing {
namespace {

/// What the descriptor link `target` (e.g. "socket:[1234]") is, without its instance.
std::string FdKind(const std::string& target) {
  for (const char* kind : {"socket", "pipe"}) {
    if (absl::StartsWith(target, absl::StrCat(kind, ":["))) return kind;
  }
  if (absl::StartsWith(target, "/memfd:")) return "memfd";
  return target;
}

/// gRPC's process-wide pools that start threads on bursts of work and end them only at
/// shutdown: its timer threads (iomgr's and the event engine's) and its executors.
constexpr const char* kGrpcGrowingPools[] = {"grpc_global_tim", "timer_manager", "default-executo",
                                             "resolver-execut"};

/// Adds `name_of(entry)` for every entry of `dir` to `counts`; false if `dir` cannot be read.
template <typename NameOf>
bool CountEntries(const std::string& dir, NameOf name_of, std::map<std::string, int>& counts) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end;
       it.increment(error)) {
    ++counts[name_of(it->path())];
  }
  return !error;
}

template <typename Count>
std::ostream& operator<<(std::ostream& out, const std::map<std::string, Count>& counts) {
  out << "{";
  for (const auto& [name, count] : counts) out << " " << name << ": " << count;
  return out << " }";
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const Footprint& footprint) {
  return out << "{fds " << footprint.fds << ", threads " << footprint.threads << ", sessions "
             << footprint.sessions << ", buffers " << footprint.buffers << " ("
             << footprint.buffer_bytes << " bytes), communicators " << footprint.communicators
             << ", rx pool bytes used " << footprint.rx_pool_bytes_used << ", data sessions up "
             << footprint.data_sessions_up << ", tenant use " << footprint.tenant_use << "}";
}

FootprintProbe::FootprintProbe(Daemon& daemon)
    : pid_(daemon.process().pid()),
      admin_(cclo::v1::Admin::NewStub(grpc::CreateChannel(
          "unix:" + daemon.runtime_dir() + "/admin.sock", grpc::InsecureChannelCredentials()))) {}

absl::StatusOr<Footprint> FootprintProbe::Measure() {
  Footprint footprint;
  auto fd_kind = [](const std::filesystem::path& fd) {
    std::error_code error;
    return FdKind(std::filesystem::read_symlink(fd, error).string());
  };
  auto thread_name = [](const std::filesystem::path& task) {
    std::string name;
    std::getline(std::ifstream(task / "comm"), name);
    return name;
  };
  if (!CountEntries(absl::StrCat("/proc/", pid_, "/fd"), fd_kind, footprint.fds) ||
      !CountEntries(absl::StrCat("/proc/", pid_, "/task"), thread_name, footprint.threads)) {
    return absl::UnavailableError(absl::StrCat("cannot read /proc/", pid_));
  }
  for (const char* name : kGrpcGrowingPools) footprint.threads.erase(name);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  cclo::v1::StatusResponse status;
  if (grpc::Status asked = admin_->Status(&context, {}, &status); !asked.ok()) {
    return absl::UnavailableError(absl::StrCat("Status RPC failed: ", asked.error_message()));
  }
  footprint.sessions = status.sessions();
  footprint.buffers = status.buffers();
  footprint.buffer_bytes = status.buffer_bytes();
  footprint.communicators = status.communicators();
  footprint.rx_pool_bytes_used = status.rx_pool_bytes_used();
  footprint.data_sessions_up = status.data_sessions_up();
  grpc::ClientContext tenants_context;
  tenants_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  cclo::v1::ListTenantsResponse tenants;
  if (grpc::Status asked = admin_->ListTenants(&tenants_context, {}, &tenants); !asked.ok()) {
    return absl::UnavailableError(absl::StrCat("ListTenants RPC failed: ", asked.error_message()));
  }
  for (const cclo::v1::TenantInfo& tenant : tenants.tenants()) {
    for (const cclo::v1::QuotaUse& quota : tenant.quotas()) {
      footprint.tenant_use[absl::StrCat(tenant.name(), "/", quota.name())] = quota.used();
    }
  }
  return footprint;
}

absl::StatusOr<Footprint> FootprintProbe::Steady(absl::Duration timeout) {
  absl::StatusOr<Footprint> last = Measure();
  const bool steady = WaitUntil(
      [&] {
        absl::StatusOr<Footprint> now = Measure();
        const bool same = now.ok() && last.ok() && *now == *last;
        last = std::move(now);
        return same;
      },
      timeout);
  if (!steady) {
    return absl::DeadlineExceededError(
        absl::StrCat("no two measurements in a row agreed within ", absl::FormatDuration(timeout)));
  }
  return last;
}

Footprint FootprintProbe::SettleAt(const Footprint& expected, absl::Duration timeout) {
  Footprint now;
  WaitUntil(
      [&] {
        absl::StatusOr<Footprint> measured = Measure();
        if (measured.ok()) now = *std::move(measured);
        return measured.ok() && now == expected;
      },
      timeout);
  return now;
}

}  // namespace cclo::testing
