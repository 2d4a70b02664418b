#include "daemon/daemon.h"

#include <arpa/inet.h>
#include <grp.h>
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/log_format.h"
#include "daemon/status.h"
#include "daemon/version.h"
#include "hw/clock.h"
#include "hw/emu/emu_device.h"
#include "hw/poe/tcp/engine.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

/// `host` as the address ReservePort binds, port 0: INVALID_ARGUMENT unless it is an IPv4 or
/// IPv6 address.
absl::StatusOr<std::pair<sockaddr_storage, socklen_t>> PeerPortAddress(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "0", &hints, &found) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host '", host, "' is not an IPv4 or IPv6 address (peer_port 0 needs one)"));
  }
  sockaddr_storage address{};
  const socklen_t length = found->ai_addrlen;
  std::memcpy(&address, found->ai_addr, length);
  freeaddrinfo(found);
  return std::make_pair(address, length);
}

/// Binds host:0 with SO_REUSEPORT to learn a free port; gRPC (which also sets
/// SO_REUSEPORT) can then bind the same port while this socket is still open.
absl::StatusOr<std::pair<int, uint16_t>> ReservePort(const std::string& host) {
  absl::StatusOr<std::pair<sockaddr_storage, socklen_t>> bound = PeerPortAddress(host);
  if (!bound.ok()) return bound.status();
  auto [address, length] = *bound;
  int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    absl::Status status = absl::UnavailableError(
        absl::StrCat("cannot reserve a peer port on ", host, ": ", std::strerror(errno)));
    if (fd >= 0) close(fd);
    return status;
  }
  const uint16_t port = address.ss_family == AF_INET6
                            ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                            : reinterpret_cast<sockaddr_in*>(&address)->sin_port;
  return std::make_pair(fd, ntohs(port));
}

/// How often the Peer port pings a connection, busy or idle, and how long it waits for the
/// answer before it closes the connection. Its clients are other hosts' daemons, which can
/// vanish without a word (a crash, a partition that outlasts them): without the pings each
/// such connection would hold its descriptor for gRPC's default of two hours.
constexpr int kPeerKeepaliveMs = 10'000;
constexpr int kPeerKeepaliveTimeoutMs = 10'000;

/// A server of `service` listening at `address`; with an empty address, one without a
/// listening port, for a GrpcUnixListener to hand connections to.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, grpc::Service* service,
    const std::shared_ptr<grpc::ServerCredentials>& credentials = grpc::InsecureServerCredentials(),
    bool keepalive = false) {
  grpc::ServerBuilder builder;
  if (keepalive) {
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kPeerKeepaliveMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kPeerKeepaliveTimeoutMs);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    // Unlimited: by default gRPC stops pinging after two pings without data.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  int port = 0;
  if (!address.empty()) builder.AddListeningPort(address, credentials, &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  return server;
}

/// Threads a gRPC 1.51 server takes: a polling thread and the one that polls while it
/// handles a call (without it a first call may be 'Server Threadpool Exhausted', gRPC logging
/// 'Could not create grpc_sync_server worker-thread').
constexpr int kThreadsPerServer = 2;

/// Threads a start takes to serve: 7 of cclod's own (the data port, the peer client, op
/// deadlines, the peer port's restarts, client.sock, admin.sock, attach.sock), 5 of
/// civetweb's (its master and num_threads 4 workers) and gRPC 1.51's: 2 executors, 2 timer
/// threads, its event engine's timer and pool, the pool one per configured CPU from 2 to 32
/// (as gRPC counts them), and kThreadsPerServer per server (3). 25 on 2 CPUs; failure_test
/// checks that a daemon with just those and the main thread starts and answers.
int StartThreads() {
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  return 7 + 5 + 2 + 2 + 1 + static_cast<int>(std::clamp(cpus, 2L, 32L)) + 3 * kThreadsPerServer;
}

/// Whether `count` threads can be had at once for `what`, held until all started and then
/// ended: checked before a start takes any (gRPC's library's first included), and before a
/// new peer port server, as gRPC and civetweb do not fail cleanly without theirs. gRPC ends the
/// process when a server cannot start its first polling thread ('assertion failed:
/// worker->created()', SIGABRT) and goes on short of any other (an executor short runs nothing
/// queued on it); civetweb fails without two, saying only 'null context'.
absl::Status CheckThreadsFree(int count, const std::string& what) {
  absl::Notification release;
  std::vector<std::thread> held(count);
  std::vector<std::atomic<pid_t>> tids(count);
  absl::Status started;
  for (int i = 0; i < count && started.ok(); ++i) {
    started =
        hw::StartThread(held[i], absl::StrCat(what, ", which takes ", count, "; ", i, " started"),
                        [&release, &tid = tids[i]] {
                          tid = gettid();
                          release.WaitForNotification();
                        });
  }
  release.Notify();
  for (std::thread& thread : held) {
    if (thread.joinable()) thread.join();
  }
  // A joined thread still counts against the limits until the kernel releases it (and takes
  // it out of /proc), a moment after the join returns: the start's own threads would not
  // find its place free yet.
  const hw::SteadyTime give_up = hw::SteadyNow() + absl::Seconds(1);
  auto released = [&tids] {
    return std::all_of(tids.begin(), tids.end(), [](const std::atomic<pid_t>& tid) {
      return tid == 0 || !std::filesystem::exists(absl::StrCat("/proc/self/task/", tid.load()));
    });
  };
  while (!released() && hw::SteadyNow() < give_up) absl::SleepFor(absl::Milliseconds(1));
  return started;
}

/// The id of admin_group `group`; -1 (no change) when it is empty.
absl::StatusOr<gid_t> AdminGroupId(const std::string& group) {
  if (group.empty()) return static_cast<gid_t>(-1);
  ::group entry{};
  ::group* found = nullptr;
  std::vector<char> text;
  // A lookup that fails (the group database unreachable) may work at the next start.
  if (const int error = LookUpWithRoom(text,
                                       [&](char* buffer, size_t size) {
                                         return getgrnam_r(group.c_str(), &entry, buffer, size,
                                                           &found);
                                       });
      error != 0) {
    return absl::UnavailableError(absl::StrCat("config key 'admin_group': cannot look up '", group,
                                               "': ", std::strerror(error)));
  }
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key 'admin_group': no group named '", group, "'"));
  }
  return entry.gr_gid;
}

/// Mode 0660 and, if `group` is set, that group: who may use ccloctl.
absl::Status SetAdminMode(const std::string& path, const std::string& group) {
  absl::StatusOr<gid_t> gid = AdminGroupId(group);
  if (!gid.ok()) return gid.status();
  if (chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0 || chmod(path.c_str(), 0660) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot set owner group and mode of ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

/// Whether SetAdminMode may give admin.sock to `group`: without CAP_CHOWN a process gives its
/// files only to its own groups (under systemd, SupplementaryGroups= adds one). Tried on a
/// memfd, which leaves nothing behind.
absl::Status CheckAdminGroup(const std::string& group) {
  absl::StatusOr<gid_t> gid = AdminGroupId(group);
  if (!gid.ok() || group.empty()) return gid.status();
  const int probe = memfd_create("cclod-admin-group", MFD_CLOEXEC);
  if (probe < 0) return absl::OkStatus();
  const int refused = fchown(probe, static_cast<uid_t>(-1), *gid) == 0 ? 0 : errno;
  close(probe);
  if (refused == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "config key 'admin_group': cclod may not give admin.sock to group '", group, "' (gid ", *gid,
      "): ", std::strerror(refused), "; it is none of cclod's groups (under systemd, add ",
      "SupplementaryGroups=", group, ")"));
}

/// Where the metrics are served: metrics_host, or host where it is empty.
const std::string& MetricsHost(const Config& config) {
  return config.metrics_host.empty() ? config.host : config.metrics_host;
}

/// What a start checks of the keys that this host may refuse and that apply only at a
/// start: the runtime dir, the admin group, the peer TLS files, the addresses it listens on
/// (host and metrics_host) and the data sessions' congestion control. A reload checks them
/// too, so that it does not take a file the next start refuses; the admin group and a host
/// or metrics_host name only where they differ from those of `taken`, the last config the
/// start or a reload took, which were looked up then (a group database or resolver that
/// fails or is slow for now then neither refuses nor holds up a reload of other keys).
absl::Status CheckStartable(const Config& config, const Config& taken) {
  absl::Status refused = RuntimeLock::CheckDir(config.runtime_dir);
  if (refused.ok() && config.admin_group != taken.admin_group) {
    refused = CheckAdminGroup(config.admin_group);
  }
  if (refused.ok()) refused = LoadPeerTls(config).status();
  if (refused.ok() && config.peer_port == 0) refused = PeerPortAddress(config.host).status();
  if (refused.ok() && config.host != taken.host) {
    refused = hw::poe::tcp::CheckListenHost(config.host);
    if (!refused.ok()) {
      refused =
          absl::Status(refused.code(), absl::StrCat("config key 'host': ", refused.message()));
    }
  }
  if (refused.ok() && MetricsHost(config) != MetricsHost(taken)) {
    refused = MetricsServer::CheckHost(MetricsHost(config), config.metrics_port);
  }
  if (refused.ok() && !config.data_tcp_congestion.empty()) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      refused = hw::poe::tcp::SetCongestion(fd, config.data_tcp_congestion);
      close(fd);
    }
  }
  if (refused.ok()) return refused;
  return absl::Status(refused.code(),
                      absl::StrCat("the next start would refuse it: ", refused.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const Config& config) {
  // One there that cannot be cclod's (a file, a link, another user's) is a bad config, which
  // making it would report as a failure to retry ('Not a directory', exit code 1).
  if (absl::Status usable = RuntimeLock::CheckDir(config.runtime_dir); !usable.ok()) {
    return usable;
  }
  if (absl::Status free =
          CheckThreadsFree(StartThreads(), "the start (gRPC's and civetweb's threads included)");
      !free.ok()) {
    return free;
  }
  // gRPC's library, whose first threads start here, stays initialised until the process
  // ends: its shutdown, run as the last server or channel goes, waits for every thread gRPC
  // counted, and gRPC 1.51 counts a timer thread it failed to start (its user at the
  // process limit while the daemon ran), so the daemon's stop never ended. (Its threads
  // then outlive main; they are idle by then.)
  grpc_init();
  std::error_code error;
  const bool created = std::filesystem::create_directories(config.runtime_dir, error);
  // A dir made here is cclod's alone to write whatever the umask (RuntimeLock::Take
  // refuses one others may write), and the applications reach its sockets.
  if (!error && created) {
    std::filesystem::permissions(config.runtime_dir, std::filesystem::perms(0755),
                                 std::filesystem::perm_options::replace, error);
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create runtime dir ", config.runtime_dir, ": ", error.message()));
  }
  // From here, whatever the caller's umask (the dirs above were made with it), what cclod
  // makes is its user's alone until it sets the mode it means: a socket is bound before its
  // chmod, and one that a umask of 0 left open meanwhile would let any user connect and
  // keep the connection.
  umask(0077);
  absl::StatusOr<RuntimeLock> lock = RuntimeLock::Take(config.runtime_dir);
  if (!lock.ok()) return lock.status();
  hw::emu::EmuConfig emu;
  emu.listen_host = config.host;
  emu.data_port = config.data_port;
  emu.rx_pool_bytes = config.rx_pool_bytes;
  emu.scratch_max_bytes = config.scratch_max_bytes;
  emu.segment_bytes = config.segment_bytes;
  emu.eager_max_bytes = config.eager_max_bytes;
  emu.credits_per_peer = config.credits_per_peer;
  emu.rendezvous_waiting_per_peer = config.rendezvous_waiting_per_peer;
  emu.peer_timeout = config.peer_timeout;
  emu.link_bytes_per_second = config.data_link_gbps * 125'000'000;
  emu.tcp_congestion = config.data_tcp_congestion;
  absl::StatusOr<std::optional<PeerTls>> peer_tls = LoadPeerTls(config);
  if (!peer_tls.ok()) return peer_tls.status();
  absl::StatusOr<hw::DevicePtr> device = hw::emu::CreateEmuDevice(emu);
  if (!device.ok()) return device.status();
  uint16_t peer_port = config.peer_port;
  int reserved_fd = -1;
  if (peer_port == 0) {
    absl::StatusOr<std::pair<int, uint16_t>> reserved = ReservePort(config.host);
    if (!reserved.ok()) return reserved.status();
    std::tie(reserved_fd, peer_port) = *reserved;
  }
  std::unique_ptr<Daemon> daemon(new Daemon(config, *std::move(lock), *std::move(device),
                                            hw::HostPort(config.host, peer_port), *peer_tls));
  daemon->ApplyScheduling();
  absl::Status started = daemon->peer_client_.Start();
  if (started.ok()) started = daemon->ops_.StartDeadlines();
  if (started.ok()) started = daemon->StartServers(peer_port);
  if (reserved_fd >= 0) close(reserved_fd);
  if (!started.ok()) return started;
  if (peer_tls->has_value()) {
    spdlog::info("peer service: mutual TLS, certificate {}, peers must chain to CA {}",
                 config.peer_tls_cert_file, config.peer_tls_ca_file);
  } else {
    spdlog::info("peer service: plaintext (no peer_tls_* keys in the config)");
  }
  spdlog::info("cclod {} ready: peer {}, data {}, metrics {}, runtime dir {}", kVersion,
               daemon->peer_address(), daemon->device_->DataAddress(),
               daemon->metrics_server_->address(), config.runtime_dir);
  return daemon;
}

Daemon::Daemon(const Config& config, RuntimeLock lock, hw::DevicePtr device,
               std::string peer_address, const std::optional<PeerTls>& peer_tls)
    : config_(config),
      taken_(config),
      lock_(std::move(lock)),
      device_(std::move(device)),
      peer_address_(std::move(peer_address)),
      tenants_(config_),
      peer_server_credentials_(PeerServerCredentials(peer_tls)),
      peer_client_(PeerChannelCredentials(peer_tls)),
      root_gather_(config.join_timeout),
      policies_(config.policy),
      communicators_(device_.get(), &peer_client_, &root_gather_, &policies_, peer_address_),
      drain_(&sessions_, &communicators_, &root_gather_, [] { kill(getpid(), SIGTERM); }),
      ops_(device_.get(), &communicators_, &op_stats_, &drain_, config.op_deadline),
      client_service_(&config_, &sessions_, &communicators_, &ops_, &drain_),
      peer_service_(&root_gather_),
      admin_service_(peer_address_, &tenants_, &sessions_, &communicators_, &policies_,
                     device_.get(), &drain_, &op_stats_, &peer_client_) {}

absl::Status Daemon::StartServers(int peer_port) {
  const std::string dir = config_.runtime_dir;
  // gRPC's servers first, before any socket file: gRPC may still end the process.
  const std::string peer = hw::HostPort(config_.host, peer_port);
  absl::StatusOr<std::unique_ptr<PeerServer>> peer_server = PeerServer::Start(
      peer,
      [this, peer]() -> absl::StatusOr<std::unique_ptr<grpc::Server>> {
        if (absl::Status free = CheckThreadsFree(kThreadsPerServer, "a new peer port server");
            !free.ok()) {
          return free;
        }
        return StartServer(peer, &peer_service_, peer_server_credentials_, /*keepalive=*/true);
      },
      // A root answers a join by its deadline: the grace lets the answer out.
      config_.join_timeout + PeerClient::kRootAnswerGrace,
      [this] { admin_service_.CountAcceptPause(AdminService::Listener::kPeer); });
  if (!peer_server.ok()) return peer_server.status();
  peer_server_ = *std::move(peer_server);
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = StartServer("", &client_service_);
  if (!server.ok()) return server.status();
  client_server_ = *std::move(server);
  server = StartServer("", &admin_service_);
  if (!server.ok()) return server.status();
  admin_server_ = *std::move(server);

  absl::StatusOr<std::unique_ptr<GrpcUnixListener>> listener = GrpcUnixListener::Start(
      dir + "/client.sock", 0666, client_server_.get(),
      [this] { admin_service_.CountAcceptPause(AdminService::Listener::kClient); });
  if (!listener.ok()) return listener.status();
  client_listener_ = *std::move(listener);
  // Its user's alone until SetAdminMode gives it to the admin group.
  listener = GrpcUnixListener::Start(dir + "/admin.sock", 0600, admin_server_.get(), [this] {
    admin_service_.CountAcceptPause(AdminService::Listener::kAdmin);
  });
  if (!listener.ok()) return listener.status();
  admin_listener_ = *std::move(listener);
  if (absl::Status owned = SetAdminMode(dir + "/admin.sock", config_.admin_group); !owned.ok()) {
    return owned;
  }

  absl::StatusOr<std::unique_ptr<Rings>> rings = Rings::Create(&ops_);
  if (!rings.ok()) return rings.status();
  rings_ = *std::move(rings);
  device_->AddPoller(rings_.get());
  device_->SetEventHandler(
      [this](const hw::CommunicatorEvent& event) { communicators_.EngineEvent(event); });
  absl::StatusOr<std::unique_ptr<AttachServer>> attach = AttachServer::Start(
      dir + "/attach.sock", &tenants_, &sessions_,
      [this](const SessionPtr& session) {
        rings_->Close(session->id());
        communicators_.EndSession(session);
        ops_.EndSession(session);
      },
      [this] { return drain_.Admit("new sessions"); },
      [this](const SessionPtr& session) { return rings_->Open(session); },
      [this] { admin_service_.CountAcceptPause(AdminService::Listener::kAttach); });
  if (!attach.ok()) return attach.status();
  attach_server_ = *std::move(attach);

  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
      MetricsServer::Start(MetricsHost(config_), config_.metrics_port, [this] {
        const hw::DeviceStats device = device_->Stats();
        return Snapshot{admin_service_.Snapshot(),
                        admin_service_.Tenants(),
                        op_stats_.Totals(),
                        {{"connecting", device.sessions_connecting},
                         {"up", device.sessions_up},
                         {"left", device.sessions_left},
                         {"lost", device.sessions_lost}},
                        device.sessions_lost_total};
      });
  if (!metrics.ok()) return metrics.status();
  metrics_server_ = *std::move(metrics);
  return absl::OkStatus();
}

void Daemon::ApplyScheduling() {
  // The engine shares itself between the tenants by their weights (DESIGN 9), and holds
  // each to its scratch quota.
  hw::Scheduling scheduling{.fair = config_.scheduler != "fifo"};
  for (const TenantPtr& tenant : tenants_.All()) {
    scheduling.weights[tenant->index()] = tenant->weight();
    scheduling.scratch_bytes[tenant->index()] = tenant->scratch_bytes();
  }
  device_->SetScheduling(scheduling);
}

absl::StatusOr<std::vector<std::string>> Daemon::Reload(const absl::StatusOr<Config>& loaded) {
  absl::Status applied = loaded.ok() ? CheckStartable(*loaded, taken_) : loaded.status();
  if (applied.ok()) applied = tenants_.Reload(*loaded);
  admin_service_.CountReload(applied);
  if (!applied.ok()) return applied;
  const Config& config = *loaded;
  taken_ = config;
  ApplyScheduling();
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  SetLogFormat(config.log_format);
  spdlog::info("policy version {} in force ({} rules)", policies_.Replace(config.policy),
               config.policy.rules_size());
  std::vector<std::string> kept;
  auto keep = [&kept](const char* key, bool same) {
    if (!same) kept.push_back(key);
  };
  keep("runtime_dir", config.runtime_dir == config_.runtime_dir);
  keep("host", config.host == config_.host);
  keep("peer_port", config.peer_port == config_.peer_port);
  keep("data_port", config.data_port == config_.data_port);
  keep("metrics_host", config.metrics_host == config_.metrics_host);
  keep("metrics_port", config.metrics_port == config_.metrics_port);
  keep("rx_pool_bytes", config.rx_pool_bytes == config_.rx_pool_bytes);
  keep("scratch_max_bytes", config.scratch_max_bytes == config_.scratch_max_bytes);
  keep("segment_bytes", config.segment_bytes == config_.segment_bytes);
  keep("eager_max_bytes", config.eager_max_bytes == config_.eager_max_bytes);
  keep("credits_per_peer", config.credits_per_peer == config_.credits_per_peer);
  keep("rendezvous_waiting_per_peer",
       config.rendezvous_waiting_per_peer == config_.rendezvous_waiting_per_peer);
  keep("peer_timeout_ms", config.peer_timeout == config_.peer_timeout);
  keep("data_link_gbps", config.data_link_gbps == config_.data_link_gbps);
  keep("data_tcp_congestion", config.data_tcp_congestion == config_.data_tcp_congestion);
  keep("max_buffer_bytes", config.max_buffer_bytes == config_.max_buffer_bytes);
  keep("op_deadline_ms", config.op_deadline == config_.op_deadline);
  keep("join_timeout_ms", config.join_timeout == config_.join_timeout);
  keep("admin_group", config.admin_group == config_.admin_group);
  keep("scheduler", config.scheduler == config_.scheduler);
  keep("peer_tls_cert_file", config.peer_tls_cert_file == config_.peer_tls_cert_file);
  keep("peer_tls_key_file", config.peer_tls_key_file == config_.peer_tls_key_file);
  keep("peer_tls_ca_file", config.peer_tls_ca_file == config_.peer_tls_ca_file);
  return kept;
}

Daemon::~Daemon() {
  metrics_server_.reset();  // first: a scrape reads what the rest of this stops
  // Wake every handler that could be waiting (joins, configures, op waits) before the
  // servers wait for their handlers to return.
  root_gather_.Refuse(absl::UnavailableError("root daemon is shutting down"));
  for (const TenantPtr& tenant : tenants_.All()) {
    tenant->StopWaits(ShuttingDown());
  }
  peer_client_.Stop();
  communicators_.Stop();
  attach_server_.reset();  // ends every session
  client_listener_.reset();
  admin_listener_.reset();
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Seconds(2);
  if (peer_server_) peer_server_->Shutdown(deadline);
  for (grpc::Server* server : {client_server_.get(), admin_server_.get()}) {
    if (server) server->Shutdown(hw::ToWallDeadline(deadline));
  }
  device_.reset();
}

}  // namespace cclo::daemon
