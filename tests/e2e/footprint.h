// What a running cclod holds, as the leak tests compare it: its descriptors by kind and its
// threads by name (from /proc/<pid>), and the daemon's own count of sessions, buffers,
// communicators, rx pool use and data sessions (its Admin Status RPC).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cclo/v1/admin.grpc.pb.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {

/// What a daemon holds: from /proc, then from its Status and ListTenants RPCs.
struct Footprint {
  /// Open descriptors by kind: "socket", "pipe", "memfd", "anon_inode:[eventfd]", or the path.
  std::map<std::string, int> fds;
  /// Threads by name (/proc/<pid>/task/*/comm), but for gRPC's timer and executor threads:
  /// gRPC starts more of those on bursts of work and ends them only at shutdown. The gRPC
  /// servers' threads are counted, as a stuck RPC would hold one; each server keeps one to
  /// three idle, as many as it once served at the same time, so warm-ups repeat the load.
  std::map<std::string, int> threads;
  uint32_t sessions = 0;
  uint32_t buffers = 0;
  uint64_t buffer_bytes = 0;
  uint32_t communicators = 0;
  uint64_t rx_pool_bytes_used = 0;
  uint64_t data_sessions_up = 0;
  /// What the tenants hold, by "tenant/quota" (ListTenants RPC).
  std::map<std::string, uint64_t> tenant_use;

  /// Equal in everything listed above.
  bool operator==(const Footprint& other) const = default;
};

std::ostream& operator<<(std::ostream& out, const Footprint& footprint);

/// Measures one daemon. It asks over a channel of its own that stays open, so that
/// measuring leaves no connection behind to be counted next time.
class FootprintProbe {
 public:
  explicit FootprintProbe(Daemon& daemon);

  /// The footprint now; an error if /proc or the Status RPC did not answer.
  absl::StatusOr<Footprint> Measure();

  /// Measures until two measurements in a row agree (what was closing has closed) and
  /// returns that footprint; an error if none did within `timeout`.
  absl::StatusOr<Footprint> Steady(absl::Duration timeout = absl::Seconds(60));

  /// Measures until the footprint equals `expected` or `timeout` passes; returns the last
  /// footprint measured.
  Footprint SettleAt(const Footprint& expected, absl::Duration timeout = absl::Seconds(60));

 private:
  const pid_t pid_;
  std::unique_ptr<cclo::v1::Admin::Stub> admin_;
};

}  // namespace cclo::testing
