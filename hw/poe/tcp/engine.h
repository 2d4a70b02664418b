// TcpEngine: the TCP protocol offload engine. One thread runs an epoll loop over the
// listening socket, an eventfd for posted tasks, every session socket and the pollers
// (hw/poller.h). After work it keeps turning for a short spin; then it sleeps until I/O,
// a posted task, a poller's fd, or the nearest deadline (handler's, a handshake's, a
// poller's, or the next heartbeat tick while sessions are up). No thread per connection or
// per call.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hw/clock.h"
#include "hw/poe/engine.h"
#include "hw/poe/tcp/session.h"
#include "hw/poe/tcp/socket_buffers.h"

namespace cclo::hw::poe::tcp {

/// Most accepted connections that may be in their handshake at once, counting those
/// authenticated but not yet admitted (their communicator is not configured here yet);
/// one more closes the oldest of them (a wire error). Connecting costs nothing to anyone,
/// so a newcomer must not wait behind the idle ones: holding every slot takes a flood of
/// connections faster than a peer's HELLO, not one per slot per handshake timeout. A
/// session waiting to be admitted has the handshake timeout too: whoever holds a
/// communicator's secret (every app of its tenant) could otherwise keep any number open.
/// Sessions the engine opens itself do not count.
inline constexpr size_t kMaxAcceptedHandshakes = 256;

/// Most connections accepted per loop turn; more wait in the listener's queue for the next
/// turn, so connecting faster than the engine accepts does not keep it from the sessions'
/// data.
inline constexpr size_t kAcceptsPerTurn = 64;

struct TcpEngineConfig {
  /// Address to listen on: numeric, or a name resolved once here (the engine announces the
  /// numeric address it bound).
  std::string listen_host = "127.0.0.1";
  uint16_t port = 0;                      ///< 0 picks an ephemeral port
  uint64_t segment_bytes = 1 << 20;       ///< largest segment this engine receives
  uint64_t eager_bytes = 64 << 10;        ///< largest eager message it accepts (<= segment)
  absl::Duration handshake_timeout = absl::Seconds(10);
  /// An up session on which nothing came for this long, or for the peer's if shorter, is
  /// lost (UNAVAILABLE): its peer hangs, or its host or the network went away without a
  /// reset. Each side sends heartbeats while it has nothing else to send
  /// (TcpSession::Heartbeat). In [poe::kMinPeerTimeoutMs, poe::kMaxPeerTimeoutMs]: a peer
  /// refuses a timeout outside.
  absl::Duration peer_timeout = absl::Seconds(10);
  /// Link rate for socket buffer sizing (socket_buffers.h); 0: buffers left to the kernel.
  uint64_t link_bytes_per_second = 0;
  /// TCP congestion control of every session, outgoing and accepted (TCP_CONGESTION);
  /// empty: the host's (net.ipv4.tcp_congestion_control).
  std::string congestion;
  /// How long the loop keeps turning without sleeping after its last work: a reply to what
  /// it just did (the next command, the peer's answer) is then taken without a wake-up.
  absl::Duration spin = absl::Microseconds(50);
};

/// The first line of /proc/sys/net/ipv4/`name` (e.g. tcp_congestion_control, the host's
/// congestion control), or "unknown".
std::string Ipv4Setting(const std::string& name);

/// Whether `name` can name a TCP congestion control: 1 to 15 letters, digits or '_'
/// (TCP_CA_NAME_MAX). Whether the kernel offers it shows when a socket takes it.
bool IsCongestionName(const std::string& name);

/// Gives socket `fd` TCP congestion control `name` (nothing when empty: the host's stays).
/// INVALID_ARGUMENT if the kernel refuses it, saying why: not offered (and what it offers),
/// or not allowed without CAP_NET_ADMIN (and what is allowed).
absl::Status SetCongestion(int fd, const std::string& name);

/// Whether CreateTcpEngine can resolve `listen_host` (a name or a numeric address):
/// INVALID_ARGUMENT for a name that does not resolve, UNAVAILABLE when the resolver fails
/// for now.
absl::Status CheckListenHost(const std::string& listen_host);

/// Binds and listens: UNAVAILABLE if the port is taken, INVALID_ARGUMENT if the kernel
/// refuses config.congestion (not offered, or not allowed without CAP_NET_ADMIN). Call
/// Start() to run the loop.
absl::StatusOr<EnginePtr> CreateTcpEngine(const TcpEngineConfig& config, EngineHandler* handler);

class TcpEngine final : public Engine {
 public:
  TcpEngine(const TcpEngineConfig& config, EngineHandler* handler, int listen_fd, int epoll_fd,
            int wake_fd, std::string address);
  ~TcpEngine() override;

  // Engine
  const std::string& address() const override { return address_; }
  absl::Status Start() override;
  void Post(std::function<void()> task) override;
  void AddPoller(Poller* poller) override;
  void Stop() override;
  absl::StatusOr<Session*> Connect(const CommId& comm, const CommSecret& secret,
                                   const std::string& peer_address) override;
  uint64_t wire_errors() const override { return wire_errors_.load(); }
  uint64_t accept_pauses() const override { return accept_pauses_.load(); }
  void SetTurnBytes(uint64_t bytes) override { turn_bytes_ = std::max<uint64_t>(bytes, 1); }

  // For TcpSession (engine thread).
  uint64_t turn_bytes() const { return turn_bytes_; }
  EngineHandler& handler() { return *handler_; }
  uint64_t segment_bytes() const { return config_.segment_bytes; }
  uint64_t eager_bytes() const { return config_.eager_bytes; }
  /// Sets the epoll interest of a session's socket.
  void SetEvents(TcpSession& session, bool read, bool write);
  /// Flushes the session's send queue at the end of this loop turn.
  void WantFlush(uint64_t id) { flush_.push_back(id); }
  /// The session closed its socket; it is destroyed at the end of this loop turn.
  void Retire(uint64_t id);
  /// The session's handshake is over (an outgoing one authenticated, an accepted one
  /// admitted); its deadline and slot no longer apply.
  void HandshakeFinished(uint64_t id);
  /// Gives session `id` a heartbeat tick every `period` while it is up (at multiples of
  /// `period` on the monotonic clock, the first within one period).
  void ScheduleHeartbeat(uint64_t id, absl::Duration period);
  absl::Duration peer_timeout() const { return config_.peer_timeout; }
  absl::Duration handshake_timeout() const { return config_.handshake_timeout; }
  void CountWireError() { wire_errors_.fetch_add(1); }
  /// Sizes the buffers of a session's socket that is up for its path (socket_buffers.h)
  /// and says so in the log when it changed them.
  void SizeBuffers(int fd, const std::string& name) const;

 private:
  void Loop();
  /// Polls every poller; whether any had work.
  bool Poll();
  /// epoll_wait's timeout: 0 while `spinning`, else until the nearest deadline (the
  /// handler's, a handshake's, a heartbeat tick, the pollers'), having told the pollers the
  /// loop sleeps.
  int SleepMs(SteadyTime now, bool spinning);
  /// Runs the tasks posted so far, in posting order.
  void RunTasks();
  void Accept();
  /// Closes the oldest accepted connection still in its handshake (kMaxAcceptedHandshakes).
  void EvictOldestHandshake();
  /// Stops (or resumes) watching the listening socket; used to back off while the
  /// process is out of descriptors, instead of spinning on a socket that stays readable.
  void WatchListener(bool watch);
  /// Registers a new session's socket and handshake deadline; `outgoing`: this engine
  /// connected (else it accepted).
  void Adopt(std::unique_ptr<TcpSession> session, bool outgoing);
  void RunDeferred();
  void ExpireHandshakes(SteadyTime now);
  /// Gives every up session whose heartbeat tick is due its tick (TcpSession::Heartbeat)
  /// and closes those found lost.
  void Heartbeats();

  const TcpEngineConfig config_;
  const AutotuneLimits autotune_ = ReadAutotuneLimits();
  EngineHandler* const handler_;
  const int listen_fd_;
  const int epoll_fd_;
  const int wake_fd_;
  const std::string address_;
  std::thread thread_;
  std::atomic<std::thread::id> loop_thread_{};  ///< set when the loop starts
  std::atomic<uint64_t> wire_errors_{0};
  std::atomic<uint64_t> accept_pauses_{0};

  // std::mutex rather than absl::Mutex: ThreadSanitizer sees through it (Debian's abseil
  // is not instrumented).
  std::mutex mu_;
  std::vector<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);

  // Engine thread only.
  /// The tasks RunTasks is running, swapped out of tasks_ (both keep their capacity).
  std::vector<std::function<void()>> running_tasks_;
  bool running_ = true;
  uint64_t turn_bytes_ = kTurnBytes;
  /// 0, 1 and 2 tag the eventfd, the listening socket and the pollers' fds in epoll.
  uint64_t next_id_ = 3;
  std::vector<Poller*> pollers_;
  bool self_posted_ = false;     ///< the loop posted tasks: run them before waiting
  bool pollers_asleep_ = false;  ///< Sleeping() was said; Awake() is due
  absl::flat_hash_map<uint64_t, std::unique_ptr<TcpSession>> sessions_;
  std::vector<std::unique_ptr<TcpSession>> retired_;
  std::vector<uint64_t> flush_;
  struct Handshake {
    SteadyTime deadline;
    bool accepted = false;  ///< the peer connected (else this engine did)
  };
  std::set<std::pair<SteadyTime, uint64_t>> handshake_deadlines_;
  absl::flat_hash_map<uint64_t, Handshake> handshake_of_;
  size_t accepted_handshakes_ = 0;  ///< of handshake_of_, those accepted
  SteadyTime handler_deadline_ = SteadyTime::InfiniteFuture();
  /// Heartbeat ticks of the up sessions.
  std::set<std::pair<SteadyTime, uint64_t>> heartbeat_ticks_;
  /// While in the future, accepting is paused (descriptors ran out).
  SteadyTime accept_paused_until_ = SteadyTime::InfinitePast();
};

}  // namespace cclo::hw::poe::tcp
