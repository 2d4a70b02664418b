#include "daemon/peer_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/grpc_log.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {

namespace {

/// UNAVAILABLE "cannot open a socket: <reason>" while this process can open none (out of
/// descriptors, say), when a server would fail to listen: gRPC logs that at length.
absl::Status SocketFree() {
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open a socket: ", std::strerror(errno)));
  }
  close(probe);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PeerServer>> PeerServer::Start(const std::string& address,
                                                              Build build,
                                                              absl::Duration longest_call,
                                                              std::function<void()> on_pause) {
  std::unique_ptr<PeerServer> peer(
      new PeerServer(address, std::move(build), longest_call, std::move(on_pause)));
  PeerServer* started = peer.get();
  // Before the first server listens: a stop from then on is seen.
  OnListenerStopped([started](const std::string& reason) { started->ListenerStopped(reason); });
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = peer->build_();
  if (!server.ok()) return server.status();
  {
    absl::MutexLock lock(&peer->mu_);
    peer->server_ = *std::move(server);
  }
  if (absl::Status thread =
          hw::StartThread(peer->thread_, "the peer port's restarts", [started] { started->Run(); });
      !thread.ok()) {
    return thread;
  }
  return peer;
}

PeerServer::PeerServer(std::string address, Build build, absl::Duration longest_call,
                       std::function<void()> on_pause)
    : address_(std::move(address)),
      build_(std::move(build)),
      longest_call_(longest_call),
      on_pause_(std::move(on_pause)) {}

PeerServer::~PeerServer() { Shutdown(hw::SteadyNow()); }

void PeerServer::Shutdown(hw::SteadyTime deadline) {
  OnListenerStopped(nullptr);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    stop_deadline_ = deadline;
  }
  if (thread_.joinable()) thread_.join();
  std::unique_ptr<grpc::Server> server;
  {
    absl::MutexLock lock(&mu_);
    server = std::move(server_);
  }
  if (server) server->Shutdown(hw::ToWallDeadline(deadline));
  for (Retiring& retiring : retiring_) retiring.thread.join();
}

void PeerServer::ListenerStopped(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (stopped_reason_.empty()) stopped_reason_ = reason.empty() ? "unknown error" : reason;
}

void PeerServer::Run() {
  absl::MutexLock lock(&mu_);
  auto stopped_or_stopping = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return stopping_ || !stopped_reason_.empty();
  };
  while (true) {
    mu_.Await(absl::Condition(&stopped_or_stopping));
    if (stopping_) return;
    // Taken now: a reason given later is the next server's.
    std::string why = absl::StrCat("accept failed: ", std::exchange(stopped_reason_, ""));
    std::unique_ptr<grpc::Server> next;
    while (next == nullptr) {
      spdlog::warn("peer port {}: {}; not accepting for {}", address_, why,
                   absl::FormatDuration(hw::kAcceptBackoff));
      on_pause_();
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), hw::kAcceptBackoff)) return;
      mu_.Unlock();
      const absl::Status free = SocketFree();
      absl::StatusOr<std::unique_ptr<grpc::Server>> built = free.ok() ? build_() : free;
      mu_.Lock();
      if (stopping_ && built.ok()) {
        const hw::SteadyTime deadline = stop_deadline_;
        mu_.Unlock();
        (*built)->Shutdown(hw::ToWallDeadline(deadline));
        mu_.Lock();
      }
      if (stopping_) return;
      if (built.ok()) {
        next = *std::move(built);
      } else {
        why = absl::StrCat("cannot serve it again: ", built.status().message());
      }
    }
    std::unique_ptr<grpc::Server> stopped = std::exchange(server_, std::move(next));
    spdlog::info("peer port {}: serving again", address_);
    mu_.Unlock();
    Retire(std::move(stopped));
    mu_.Lock();
  }
}

void PeerServer::Retire(std::unique_ptr<grpc::Server> stopped) {
  std::erase_if(retiring_, [](Retiring& retiring) {
    if (!*retiring.done) return false;
    retiring.thread.join();
    return true;
  });
  const hw::SteadyTime deadline = hw::SteadyNow() + longest_call_;
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<grpc::Server> server(std::move(stopped));
  std::function<void()> shut_down = [server, deadline, done] {
    server->Shutdown(hw::ToWallDeadline(deadline));
    *done = true;
  };
  Retiring retiring{.thread = {}, .done = done};
  const absl::Status started =
      hw::StartThread(retiring.thread, "a stopped peer port server's shutdown", shut_down);
  if (started.ok()) {
    retiring_.push_back(std::move(retiring));
    return;
  }
  spdlog::warn("peer port {}: {}; shutting the stopped server down meanwhile", address_,
               std::string(started.message()));
  shut_down();
}

}  // namespace cclo::daemon
