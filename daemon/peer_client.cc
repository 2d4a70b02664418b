#include "daemon/peer_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/root_gather.h"
#include "daemon/status.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

/// Whether the try failed to connect (gRPC's words for a pick that found no connection).
bool NotConnected(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         absl::StartsWith(status.error_message(), "failed to connect to all addresses");
}

/// Whether a try failed to connect because the root reset the connection unread (its
/// listener closed with the connection queued).
bool ResetUnread(const grpc::Status& status) {
  return NotConnected(status) && absl::EndsWith(status.error_message(), "Connection reset by peer");
}

/// A join's timeout as its errors give it.
std::string Rounded(absl::Duration timeout) {
  return absl::FormatDuration(absl::Ceil(timeout, absl::Milliseconds(100)));
}

/// The root's own words (or gRPC's), whatever the daemon the token names sends: escaped,
/// and cut after a whole message's room (gRPC's TLS errors run to 200 bytes).
std::string RootSays(const grpc::Status& status) {
  return hw::EscapeControl(status.error_message(), PeerClient::kMaxRootErrorBytes);
}

}  // namespace

PeerClient::PeerClient(std::shared_ptr<grpc::ChannelCredentials> credentials)
    : credentials_(std::move(credentials)) {}

PeerClient::~PeerClient() {
  Stop();
  closing_queue_.Shutdown();
  if (closer_.joinable()) closer_.join();
}

void PeerClient::Call::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

bool PeerClient::Call::Begin(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  if (cancelled_) return false;
  context_ = context;
  return true;
}

void PeerClient::Call::End() {
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
}

void PeerClient::Call::Pause(hw::SteadyTime until) {
  absl::MutexLock lock(&mu_);
  hw::AwaitUntil(mu_, absl::Condition(&cancelled_), until);
}

absl::Status PeerClient::Start() {
  return hw::StartThread(closer_, "the peer client", [this] { CloseSettled(); });
}

absl::StatusOr<cclo::v1::PeerJoinResponse> PeerClient::Join(
    const std::string& root_address, const cclo::v1::PeerJoinRequest& request,
    hw::SteadyTime deadline, Call& call) {
  const absl::Duration timeout = deadline - hw::SteadyNow();
  const ChannelKey key(root_address, request.comm_id(), request.tenant());
  std::shared_ptr<cclo::v1::Peer::Stub> stub;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return ShuttingDown();
    calls_.insert(&call);
    stub = StubFor(key);
  }
  cclo::v1::PeerJoinRequest attempt = request;
  cclo::v1::PeerJoinResponse response;
  grpc::Status status;
  int tries = 0;
  for (absl::Duration pause = kRetryPause;; pause = std::min(2 * pause, kMaxRetryPause)) {
    grpc::ClientContext context;
    context.set_deadline(hw::ToWallDeadline(deadline + kRootAnswerGrace));
    if (!call.Begin(&context)) {
      status = grpc::Status(grpc::StatusCode::CANCELLED, "Cancelled");
      break;
    }
    attempt.set_timeout_ms(JoinTimeoutMs(deadline - hw::SteadyNow()));
    status = stub->Join(&context, attempt, &response);
    call.End();
    ++tries;
    if (!NotConnected(status)) break;
    std::shared_ptr<cclo::v1::Peer::Stub> failed;
    {
      absl::MutexLock lock(&mu_);
      failed = Redial(key, stub);
    }
    failed.reset();  // outside the lock, and at once (Redial)
    // A try needs a pause's time and a second for the root to gather in.
    if (!ResetUnread(status) || hw::SteadyNow() + pause + kMaxRetryPause > deadline) break;
    retries_.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("join at root daemon {}: the root reset the connection ({}); trying again in {}",
                 root_address, RootSays(status), absl::FormatDuration(pause));
    call.Pause(hw::SteadyNow() + pause);  // a Cancel: Begin says so
  }
  absl::MutexLock lock(&mu_);
  calls_.erase(&call);
  EndJoin(key);
  if (status.ok()) return response;
  if (stopped_) return ShuttingDown();
  // A root that serves answers by 9/10 of the join's time, missing ranks and all: the
  // deadline and its grace passing is gRPC's, the root never answered.
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
      hw::SteadyNow() >= deadline + kRootAnswerGrace) {
    return absl::UnavailableError(absl::StrCat("no answer within the join timeout of ",
                                               Rounded(timeout), ": unreachable, or not serving (",
                                               RootSays(status), ")"));
  }
  std::string said = RootSays(status);
  if (tries > 1 && NotConnected(status)) {
    said = absl::StrCat("tried ", tries, " times within the join timeout of ", Rounded(timeout),
                        ": ", said);
  }
  return FromGrpc(grpc::Status(status.error_code(), said));
}

void PeerClient::Stop() {
  std::map<void*, std::shared_ptr<grpc::Channel>> closing;  // closed here, outside the lock
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  for (Call* call : calls_) call->Cancel();
  // Closing one ends the wait for its state's change (CloseSettled finds it gone).
  closing.swap(closing_);
}

size_t PeerClient::channels() const {
  absl::MutexLock lock(&mu_);
  return channels_.size() + closing_.size();
}

std::shared_ptr<cclo::v1::Peer::Stub> PeerClient::StubFor(const ChannelKey& key) {
  Channel& channel = channels_[key];
  ++channel.joins;
  if (!channel.stub) Dial(key, channel);
  return channel.stub;
}

std::shared_ptr<cclo::v1::Peer::Stub> PeerClient::Redial(
    const ChannelKey& key, std::shared_ptr<cclo::v1::Peer::Stub>& stub) {
  Channel& channel = channels_.at(key);
  if (channel.stub == stub) Dial(key, channel);  // the failed channel lives on in `stub`
  std::shared_ptr<cclo::v1::Peer::Stub> failed = std::move(stub);
  stub = channel.stub;
  return failed;
}

void PeerClient::Dial(const ChannelKey& key, Channel& channel) {
  // Subchannels of its own too: a new channel must not share another's connection or
  // backoff.
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // gRPC connects again by itself its first backoff (no jitter) after a failed attempt
  // began, and gives an attempt the larger of that and its connect timeout: both
  // kConnectTimeout, so a channel whose connection failed sooner does not connect again
  // before Redial closes it.
  const int connect_ms = static_cast<int>(absl::ToInt64Milliseconds(kConnectTimeout));
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, connect_ms);
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, connect_ms);
  channel.channel = grpc::CreateCustomChannel(std::get<0>(key), credentials_, arguments);
  channel.stub = cclo::v1::Peer::NewStub(channel.channel);
}

void PeerClient::EndJoin(const ChannelKey& key) {
  auto found = channels_.find(key);
  if (--found->second.joins > 0) return;
  std::shared_ptr<grpc::Channel> channel = std::move(found->second.channel);
  channels_.erase(found);
  if (stopped_ || channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_CONNECTING) return;
  channel->NotifyOnStateChange(GRPC_CHANNEL_CONNECTING,
                               hw::ToWallDeadline(hw::SteadyNow() + kConnectingGrace),
                               &closing_queue_, channel.get());
  closing_.emplace(channel.get(), std::move(channel));
}

void PeerClient::CloseSettled() {
  void* tag = nullptr;
  bool changed = false;
  while (closing_queue_.Next(&tag, &changed)) {
    std::shared_ptr<grpc::Channel> settled;  // closed here, outside the lock
    {
      absl::MutexLock lock(&mu_);
      auto found = closing_.find(tag);
      if (found == closing_.end()) continue;  // Stop closed it
      settled = std::move(found->second);
      closing_.erase(found);
    }
  }
}

}  // namespace cclo::daemon
