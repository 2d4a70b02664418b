#include "hw/poe/tcp/engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::hw::poe::tcp {
namespace {

constexpr uint64_t kWakeId = 0;
constexpr uint64_t kListenId = 1;
/// epoll data of every poller's wake fd (pollers are polled on every turn anyway).
constexpr uint64_t kPollerId = 2;
/// Longest the loop works without giving way to other threads that want its core (it
/// checks between sessions' turns, each up to kTurnBytes read and written).
constexpr absl::Duration kBusyYield = absl::Microseconds(100);

/// The first multiple of `period` on the monotonic clock after `now`: sessions with the
/// same period tick together, so an idle engine wakes once per period, not once per
/// session.
SteadyTime NextTick(SteadyTime now, absl::Duration period) {
  const absl::Duration step = std::max(period, absl::Nanoseconds(1));
  const SteadyTime epoch;
  return epoch + absl::Floor(now - epoch, step) + step;
}

std::string Errno(const std::string& what) {
  return absl::StrCat(what, ": ", std::strerror(errno));
}

/// Splits "host:port" or "[v6]:port".
absl::Status SplitAddress(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  uint32_t number = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &number) || number == 0 || number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("data address '", address, "' is not host:port"));
  }
  *host = address.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  *port = address.substr(colon + 1);
  return absl::OkStatus();
}

/// Resolves `host`: for the listener (`passive`) a name or a numeric address; for a peer's
/// data address only a numeric one, which never waits for a name server (engines announce
/// numeric addresses, and Connect runs on the engine thread).
absl::StatusOr<addrinfo*> Resolve(const std::string& host, const std::string& port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : AI_NUMERICHOST);
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  if (!passive && rc == EAI_NONAME) {
    return absl::InvalidArgumentError(
        absl::StrCat("data address host '", host, "' is not a numeric address"));
  }
  if (rc != 0) return ResolveFailure(host, rc);
  return result;
}

int SetNoDelay(int fd) {
  const int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

std::string Ipv4Setting(const std::string& name) {
  std::ifstream file("/proc/sys/net/ipv4/" + name);
  std::string line;
  std::getline(file, line);
  return line.empty() ? "unknown" : line;
}

absl::Status SetCongestion(int fd, const std::string& name) {
  if (name.empty() || setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), name.size()) == 0) {
    return absl::OkStatus();
  }
  const int error = errno;
  const std::string what = absl::StrCat("TCP congestion control '", name, "': ");
  if (error == EPERM) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "not allowed without CAP_NET_ADMIN (allowed: ",
                     Ipv4Setting("tcp_allowed_congestion_control"), ")"));
  }
  if (error == ENOENT) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "this kernel does not offer it (not built in or not loaded; ",
                     "it offers: ", Ipv4Setting("tcp_available_congestion_control"), ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(what, std::strerror(error)));
}

bool IsCongestionName(const std::string& name) {
  constexpr size_t kMaxName = 15;
  return !name.empty() && name.size() <= kMaxName &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
         });
}

absl::Status CheckListenHost(const std::string& listen_host) {
  absl::StatusOr<addrinfo*> resolved = Resolve(listen_host, "0", true);
  if (!resolved.ok()) return resolved.status();
  freeaddrinfo(*resolved);
  return absl::OkStatus();
}

absl::StatusOr<EnginePtr> CreateTcpEngine(const TcpEngineConfig& config, EngineHandler* handler) {
  absl::StatusOr<addrinfo*> resolved =
      Resolve(config.listen_host, std::to_string(config.port), true);
  if (!resolved.ok()) return resolved.status();
  addrinfo* ai = *resolved;
  const int listen_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  // Set before it listens: accepted sessions inherit the listener's.
  if (absl::Status congestion =
          listen_fd < 0 ? absl::OkStatus() : SetCongestion(listen_fd, config.congestion);
      !congestion.ok()) {
    freeaddrinfo(ai);
    close(listen_fd);
    return congestion;
  }
  std::string error;
  if (listen_fd < 0) {
    error = Errno("socket");
  } else if (setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
             bind(listen_fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    error = Errno(absl::StrCat("bind ", HostPort(config.listen_host, config.port)));
  } else if (listen(listen_fd, SOMAXCONN) != 0) {
    error = Errno("listen");
  }
  char numeric[NI_MAXHOST] = "";
  if (error.empty()) {
    const int rc = getnameinfo(ai->ai_addr, ai->ai_addrlen, numeric, sizeof(numeric), nullptr, 0,
                               NI_NUMERICHOST);
    if (rc != 0) error = absl::StrCat("cannot print the bound address: ", gai_strerror(rc));
  }
  freeaddrinfo(ai);
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  if (error.empty() &&
      getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_size) != 0) {
    error = Errno("getsockname");
  }
  if (!error.empty()) {
    if (listen_fd >= 0) close(listen_fd);
    return absl::UnavailableError(absl::StrCat("data port: ", error));
  }
  const uint16_t port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  // Announced numeric, as bound: a peer connecting to it needs no name server.
  std::string address = HostPort(numeric, port);

  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event wake{.events = EPOLLIN, .data = {.u64 = kWakeId}};
  epoll_event accept{.events = EPOLLIN, .data = {.u64 = kListenId}};
  if (epoll_fd < 0 || wake_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &wake) != 0 ||
      epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &accept) != 0) {
    const std::string failure = Errno("event loop setup");
    for (int fd : {listen_fd, epoll_fd, wake_fd}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(failure);
  }
  return std::make_unique<TcpEngine>(config, handler, listen_fd, epoll_fd, wake_fd,
                                     std::move(address));
}

TcpEngine::TcpEngine(const TcpEngineConfig& config, EngineHandler* handler, int listen_fd,
                     int epoll_fd, int wake_fd, std::string address)
    : config_(config),
      handler_(handler),
      listen_fd_(listen_fd),
      epoll_fd_(epoll_fd),
      wake_fd_(wake_fd),
      address_(std::move(address)) {}

TcpEngine::~TcpEngine() {
  Stop();
  sessions_.clear();
  retired_.clear();
  close(listen_fd_);
  close(wake_fd_);
  close(epoll_fd_);
}

absl::Status TcpEngine::Start() {
  return StartThread(thread_, "the data port", [this] { Loop(); });
}

void TcpEngine::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  if (std::this_thread::get_id() == loop_thread_.load()) {
    // From the loop itself (a poller's call, a completion): it runs the queue before it
    // next waits, so no wake-up is needed.
    self_posted_ = true;
    return;
  }
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof(one));
}

void TcpEngine::AddPoller(Poller* poller) {
  Post([this, poller] {
    epoll_event event{.events = EPOLLIN, .data = {.u64 = kPollerId}};
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, poller->wake_fd(), &event) != 0) {
      spdlog::error("{}", Errno("epoll_ctl for a poller"));
    }
    pollers_.push_back(poller);
  });
}

void TcpEngine::SizeBuffers(int fd, const std::string& name) const {
  const std::optional<Sizing> sizing =
      SizeSocketBuffers(fd, config_.link_bytes_per_second, autotune_);
  if (!sizing) return;
  const std::string line = sizing->Describe(config_.link_bytes_per_second, autotune_);
  if (sizing->Short(autotune_)) {
    spdlog::warn("{}: {}", name, line);
  } else {
    spdlog::info("{}: {}", name, line);
  }
}

void TcpEngine::Stop() {
  if (!thread_.joinable()) return;
  Post([this] { running_ = false; });
  thread_.join();
}

void TcpEngine::RunTasks() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_tasks_.swap(tasks_);
  }
  for (auto& task : running_tasks_) task();
  running_tasks_.clear();  // keeps its capacity for the next swap
}

bool TcpEngine::Poll() {
  bool work = false;
  for (Poller* poller : pollers_) work |= poller->Poll();
  return work;
}

int TcpEngine::SleepMs(SteadyTime now, bool spinning) {
  if (spinning) return 0;
  SteadyTime wake_at = handler_deadline_;
  if (!handshake_deadlines_.empty()) {
    wake_at = std::min(wake_at, handshake_deadlines_.begin()->first);
  }
  if (accept_paused_until_ != SteadyTime::InfinitePast()) {
    wake_at = std::min(wake_at, accept_paused_until_);
  }
  if (!heartbeat_ticks_.empty()) {
    wake_at = std::min(wake_at, heartbeat_ticks_.begin()->first);
  }
  for (Poller* poller : pollers_) wake_at = std::min(wake_at, poller->Sleeping());
  pollers_asleep_ = true;
  if (wake_at == SteadyTime::InfiniteFuture()) return -1;
  const absl::Duration left = wake_at - now;
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), INT_MAX));
}

void TcpEngine::Loop() {
  loop_thread_ = std::this_thread::get_id();
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  SteadyTime last_work = SteadyNow();
  SteadyTime last_yield = last_work;
  while (running_) {
    bool work = Poll();
    if (std::exchange(self_posted_, false)) {
      RunTasks();
      work = true;
    }
    if (work) last_work = SteadyNow();
    // A turn that did work never sleeps: what it did may have queued writes and set the
    // handler's next deadline, which only the rest of this turn flushes and learns.
    const bool spinning = work || self_posted_ || SteadyNow() - last_work < config_.spin;
    const int timeout_ms = SleepMs(SteadyNow(), spinning);
    const int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    if (n < 0 && errno != EINTR) spdlog::error("{}", Errno("epoll_wait"));
    bool poller_ready = false;
    for (int i = 0; i < n; ++i) poller_ready |= events[i].data.u64 == kPollerId;
    if (pollers_asleep_ || poller_ready) {
      pollers_asleep_ = false;
      for (Poller* poller : pollers_) poller->Awake();
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        uint64_t count = 0;
        (void)read(wake_fd_, &count, sizeof(count));
        self_posted_ = false;  // this runs them too
        RunTasks();
      } else if (id == kListenId) {
        Accept();
      } else if (auto it = sessions_.find(id); it != sessions_.end()) {
        it->second->OnEvents(events[i].events);
      }
      RunDeferred();
      // A session's turn may copy megabytes: give way between sessions too.
      if (const SteadyTime now = SteadyNow(); now - last_yield >= kBusyYield) {
        sched_yield();
        last_yield = now;
      }
    }
    const SteadyTime now = SteadyNow();
    if (n > 0) last_work = now;
    if (timeout_ms != 0) last_yield = now;  // it slept: the core was given away already
    if (accept_paused_until_ != SteadyTime::InfinitePast() && now >= accept_paused_until_) {
      accept_paused_until_ = SteadyTime::InfinitePast();
      WatchListener(true);
    }
    ExpireHandshakes(now);
    Heartbeats();
    handler_deadline_ = handler_->OnTimer(now);
    if (handler_deadline_ <= now) last_work = now;  // the handler has more work at once
    RunDeferred();
    retired_.clear();
    // The loop gives way to whatever else wants this core (clients share it): at every
    // turn while it spins idle, and every kBusyYield while it works, so that a woken
    // client does not wait a scheduler slice behind a busy engine. This idle yield comes
    // last, after the handler's turn and the writes it queued: the first send of an op
    // that a command started this turn is handed to its socket before the client runs.
    if ((n == 0 && spinning) || now - last_yield >= kBusyYield) {
      sched_yield();
      last_yield = now;
    }
  }
}

void TcpEngine::RunDeferred() {
  while (!flush_.empty()) {
    std::vector<uint64_t> flush;
    flush.swap(flush_);
    for (uint64_t id : flush) {
      if (auto it = sessions_.find(id); it != sessions_.end()) it->second->Flush();
    }
  }
}

void TcpEngine::ExpireHandshakes(SteadyTime now) {
  while (!handshake_deadlines_.empty() && handshake_deadlines_.begin()->first <= now) {
    const uint64_t id = handshake_deadlines_.begin()->second;
    HandshakeFinished(id);
    if (auto it = sessions_.find(id); it != sessions_.end()) it->second->ExpireHandshake();
  }
}

void TcpEngine::ScheduleHeartbeat(uint64_t id, absl::Duration period) {
  heartbeat_ticks_.insert({NextTick(SteadyNow(), period), id});
}

void TcpEngine::Heartbeats() {
  if (heartbeat_ticks_.empty()) return;
  const SteadyTime now = SteadyNow();
  std::vector<TcpSession*> lost;
  while (!heartbeat_ticks_.empty() && heartbeat_ticks_.begin()->first <= now) {
    const uint64_t id = heartbeat_ticks_.begin()->second;
    heartbeat_ticks_.erase(heartbeat_ticks_.begin());
    auto it = sessions_.find(id);
    if (it == sessions_.end() || !it->second->up()) continue;  // closed meanwhile
    TcpSession& session = *it->second;
    if (session.Heartbeat()) {
      lost.push_back(&session);
    } else {
      heartbeat_ticks_.insert({NextTick(now, session.heartbeat_period()), id});
    }
  }
  // Retired sessions live to the end of the turn, and closing one may close others.
  for (TcpSession* session : lost) session->Lose();
}

void TcpEngine::Accept() {
  for (size_t accepted = 0; accepted < kAcceptsPerTurn; ++accepted) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (PausesAccepting(errno)) {
        spdlog::warn("{}; not accepting data sessions for {}", Errno("accept"),
                     absl::FormatDuration(kAcceptBackoff));
        accept_pauses_.fetch_add(1);
        accept_paused_until_ = SteadyNow() + kAcceptBackoff;
        WatchListener(false);
      }
      return;
    }
    if (accepted_handshakes_ >= kMaxAcceptedHandshakes) EvictOldestHandshake();
    SetNoDelay(fd);
    const uint64_t id = next_id_++;
    Adopt(std::make_unique<TcpSession>(*this, id, fd), false);
  }
}

void TcpEngine::EvictOldestHandshake() {
  // In accept order: every handshake has the same timeout.
  auto oldest = std::find_if(handshake_deadlines_.begin(), handshake_deadlines_.end(),
                             [this](const auto& entry) {
                               auto it = handshake_of_.find(entry.second);
                               return it != handshake_of_.end() && it->second.accepted;
                             });
  if (oldest == handshake_deadlines_.end()) return;
  const uint64_t id = oldest->second;
  if (auto it = sessions_.find(id); it != sessions_.end()) it->second->Evict();
}

void TcpEngine::WatchListener(bool watch) {
  epoll_event accept{.events = watch ? uint32_t{EPOLLIN} : 0u, .data = {.u64 = kListenId}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &accept);
}

absl::StatusOr<Session*> TcpEngine::Connect(const CommId& comm, const CommSecret& secret,
                                            const std::string& peer_address) {
  std::string host, port;
  if (absl::Status status = SplitAddress(peer_address, &host, &port); !status.ok()) {
    return status;
  }
  absl::StatusOr<addrinfo*> resolved = Resolve(host, port, false);
  if (!resolved.ok()) return resolved.status();
  addrinfo* ai = *resolved;
  const int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  // Before connecting, so that the SYN asks for what the congestion control needs (ECN).
  // The listener took the same name, so only a narrowed allowed list refuses it now.
  if (absl::Status congestion = fd >= 0 ? SetCongestion(fd, config_.congestion) : absl::OkStatus();
      !congestion.ok()) {
    freeaddrinfo(ai);
    close(fd);
    return absl::FailedPreconditionError(congestion.message());
  }
  int rc = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  if (fd < 0 || (rc != 0 && errno != EINPROGRESS)) {
    const std::string error = Errno(absl::StrCat("cannot connect to peer daemon ", peer_address));
    if (fd >= 0) close(fd);
    return absl::UnavailableError(error);
  }
  SetNoDelay(fd);
  const uint64_t id = next_id_++;
  auto session = std::make_unique<TcpSession>(*this, id, fd, comm, secret, peer_address);
  Session* raw = session.get();
  Adopt(std::move(session), true);
  return raw;
}

void TcpEngine::Adopt(std::unique_ptr<TcpSession> session, bool outgoing) {
  const uint64_t id = session->id();
  const SteadyTime deadline = SteadyNow() + config_.handshake_timeout;
  handshake_deadlines_.insert({deadline, id});
  handshake_of_[id] = {deadline, !outgoing};
  if (!outgoing) ++accepted_handshakes_;
  TcpSession& ref = *session;
  sessions_[id] = std::move(session);
  SetEvents(ref, !outgoing, outgoing);  // an outgoing one first waits for its connect
}

void TcpEngine::SetEvents(TcpSession& session, bool read, bool write) {
  epoll_event event{};
  event.events = (read ? EPOLLIN : 0) | (write ? EPOLLOUT : 0);
  event.data.u64 = session.id();
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, session.fd(), &event) != 0 &&
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, session.fd(), &event) != 0) {
    spdlog::error("{}", Errno("epoll_ctl"));
  }
}

void TcpEngine::Retire(uint64_t id) {
  HandshakeFinished(id);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  retired_.push_back(std::move(it->second));
  sessions_.erase(it);
}

void TcpEngine::HandshakeFinished(uint64_t id) {
  auto it = handshake_of_.find(id);
  if (it == handshake_of_.end()) return;
  handshake_deadlines_.erase({it->second.deadline, id});
  if (it->second.accepted) --accepted_handshakes_;
  handshake_of_.erase(it);
}

}  // namespace cclo::hw::poe::tcp
