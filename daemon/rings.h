// The fast path: every session's command and completion rings (daemon/session_ring.h),
// served on the engine's own thread as its hw::Poller, so that a command becomes an
// engine call without a hand-off between threads. The engine polls the rings on every
// turn, spins briefly after work, then sleeps with the sessions' command doorbells in its
// epoll. Each poll takes at most kBatch commands of each session (fairness between
// sessions and tenants), turns each into the OpRequest it carries and submits it
// through Ops::Submit, exactly as the Submit RPC does; the op's acceptance or refusal and
// later its result go to the session's completion ring.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/ops.h"
#include "daemon/session_ring.h"
#include "daemon/sessions.h"
#include "hw/clock.h"
#include "hw/poller.h"

namespace cclo::daemon {

class Rings final : public hw::Poller {
 public:
  /// Commands taken from one session per poll.
  static constexpr size_t kBatch = 32;
  /// Commands one session may have parked (waiting for room); its ring holds the rest.
  static constexpr size_t kMaxParked = 256;

  /// Makes the rings' epoll set; give the result to hw::Device::AddPoller. Commands go to
  /// `ops` (which refuses them while the daemon drains).
  static absl::StatusOr<std::unique_ptr<Rings>> Create(Ops* ops);
  /// Tears down every ring (after the engine stopped polling).
  ~Rings() override;
  Rings(const Rings&) = delete;
  Rings& operator=(const Rings&) = delete;

  /// Creates `session`'s rings and returns the fds for its WELCOME frame (owned here).
  absl::StatusOr<std::vector<int>> Open(const SessionPtr& session);
  /// Tears down the session's rings (after Session::Close(); nothing if it has none).
  void Close(uint64_t session_id);

  // hw::Poller (the engine's thread)
  int wake_fd() const override { return epoll_fd_; }
  bool Poll() override;
  hw::SteadyTime Sleeping() override;
  void Awake() override;

 private:
  /// A session's rings and what the engine thread keeps for it.
  struct Served {
    std::weak_ptr<Session> session;
    std::shared_ptr<SessionRing> ring;
    /// A command that waits for room in the tenant's in-flight ops quota (wait_for_room),
    /// retried when the quota has room, until its deadline.
    struct Parked {
      OpRequest request;
      uint64_t cookie = 0;
      hw::SteadyTime submitted;
      hw::SteadyTime deadline;
      absl::Status refused;  ///< the quota's answer
    };
    /// Commands parked in the order they came (at most kMaxParked). While any is, later
    /// commands are still taken: RELEASE at once, a SUBMIT that waits for room behind them
    /// (ops keep the order they were posted in), one that does not refused at once.
    std::deque<Parked> parked;
    /// Results the client released (consumed, or named in a RELEASE) while commands were
    /// parked, released once none is: a parked command may name them in its `after`. Only
    /// results the session holds, each once (a RELEASE may name any id, any number of
    /// times), so at most as many as the session keeps.
    std::set<uint64_t> releases;
    bool broken = false;  ///< its command ring's indices were out of bounds
  };

  Rings(Ops* ops, int epoll_fd, int wake_fd);
  /// One pass over a session: kept completions, then up to kBatch commands, then the
  /// results the client consumed. Whether it posted or took anything (then Poll wakes
  /// the client, once for the pass).
  bool Serve(uint64_t session_id, Served& served);
  /// Refuses the parked commands whose deadline passed, then submits the others in order
  /// while the quota has room; whether it answered any.
  bool ServeParked(const SessionPtr& session, Served& served);
  /// Releases the result of `op_id` now, or once no command is parked.
  static void Release(Session& session, Served& served, uint64_t op_id);
  /// Submits a decoded command and posts its answer, or returns it to park when it waits
  /// for room that the quota has not.
  std::optional<Served::Parked> Submit(const SessionPtr& session, Served& served, OpRequest request,
                                       uint64_t cookie, hw::SteadyTime submitted);
  /// Picks up sessions opened or closed since the last pass.
  void Refresh();

  Ops* const ops_;
  const int epoll_fd_;  ///< the command doorbells and wake_fd_; the engine sleeps on it
  const int wake_fd_;   ///< eventfd: Open() or Close() changed the sessions

  absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<SessionRing>> opened_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::weak_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> version_{0};  ///< bumped by Open and Close

  /// The engine thread's view, refreshed when version_ changes.
  std::map<uint64_t, Served> served_;
  uint64_t served_version_ = 0;
};

}  // namespace cclo::daemon
