// The fast path: every session's command and completion rings (daemon/session_ring.h),
// served by one thread. It spins briefly after work, then sleeps in epoll on the
// sessions' command doorbells. Each wake takes at most kBatch commands of each session
// (fairness between sessions and tenants), turns each into the SubmitRequest it carries
// and submits it through Ops::Submit, exactly as the Submit RPC does; the op's acceptance
// or refusal and later its result go to the session's completion ring.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/drain.h"
#include "daemon/ops.h"
#include "daemon/session_ring.h"
#include "daemon/sessions.h"

namespace cclo::daemon {

class Rings {
 public:
  /// Commands taken from one session per wake.
  static constexpr size_t kBatch = 32;

  /// Starts the ring thread. Commands go to `ops` unless `drain` refuses new ops.
  static absl::StatusOr<std::unique_ptr<Rings>> Start(Ops* ops, const Drain* drain);
  /// Stops the thread and tears down every ring.
  ~Rings();
  Rings(const Rings&) = delete;
  Rings& operator=(const Rings&) = delete;

  /// Creates `session`'s rings and returns the fds for its WELCOME frame (owned here).
  absl::StatusOr<std::vector<int>> Open(const SessionPtr& session);
  /// Tears down the session's rings (after Session::Close(); nothing if it has none).
  void Close(uint64_t session_id);

 private:
  /// A session's rings and what the ring thread keeps for it.
  struct Served {
    std::weak_ptr<Session> session;
    std::shared_ptr<SessionRing> ring;
    /// A command that waits for room in the tenant's in-flight ops quota (wait_for_room),
    /// retried when the quota has room, until its deadline; the session's later commands
    /// wait behind it.
    struct Parked {
      cclo::v1::SubmitRequest request;
      uint64_t cookie = 0;
      absl::Time submitted;
      absl::Time deadline;
      absl::Status refused;  ///< the quota's answer
    };
    std::optional<Parked> parked;
    bool broken = false;  ///< its command ring's indices were out of bounds
  };

  Rings(Ops* ops, const Drain* drain, int epoll_fd, int wake_fd);
  void Run();
  /// One pass over a session: kept completions, then up to kBatch commands, then the
  /// results the client consumed. Whether there was anything to do.
  bool Serve(uint64_t session_id, Served& served);
  /// Submits a decoded command; true when it was answered, false when it parked.
  bool Submit(const SessionPtr& session, Served& served, cclo::v1::SubmitRequest request,
              uint64_t cookie, absl::Time submitted);
  /// Picks up sessions opened or closed since the last pass.
  void Refresh();

  Ops* const ops_;
  const Drain* const drain_;
  const int epoll_fd_;
  const int wake_fd_;  ///< eventfd: Close() or the destructor wants the thread's attention

  absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<SessionRing>> opened_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::weak_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> version_{0};  ///< bumped by Open and Close
  std::atomic<bool> stopping_{false};

  /// The ring thread's view, refreshed when version_ changes.
  std::map<uint64_t, Served> served_;
  uint64_t served_version_ = 0;
  std::thread thread_;  ///< runs Run(); joined by the destructor
};

}  // namespace cclo::daemon
