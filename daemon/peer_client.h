// Calls to other daemons' Peer service, over channels cached by address. Departures
// travel in-band on the data sessions (BYE with the reason), after the data sent before
// them, so no out-of-band notice can overtake data still on its way.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "hw/clock.h"

namespace cclo::daemon {

class PeerClient {
 public:
  /// At most this many channels stay cached; the least recently used goes first. Tokens
  /// name their root's address, so a tenant could otherwise make the cache grow at will.
  static constexpr size_t kMaxChannels = 64;

  /// Dials every peer with `credentials` (TLS or plaintext, see peer_tls.h).
  explicit PeerClient(std::shared_ptr<grpc::ChannelCredentials> credentials)
      : credentials_(std::move(credentials)) {}

  /// Joins a rank at the root daemon through `context` (blocks until the root answers,
  /// `deadline`, Stop, or the caller's context.TryCancel(), which fails it with CANCELLED,
  /// also when called before the join began).
  absl::StatusOr<cclo::v1::PeerJoinResponse> Join(const std::string& root_address,
                                                  const cclo::v1::PeerJoinRequest& request,
                                                  hw::SteadyTime deadline,
                                                  grpc::ClientContext& context);

  /// Ends the joins in progress and refuses later ones with ShuttingDown(): the daemon stops.
  void Stop();

  /// How many channels are cached.
  size_t channels() const;

 private:
  struct Channel {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<cclo::v1::Peer::Stub> stub;
    uint64_t used = 0;  ///< `uses_` at its last use
  };

  /// The cached stub for `address`, made anew when its channel failed to connect: gRPC
  /// then backs off reconnecting (up to two minutes), and a root daemon restarted on the
  /// address meanwhile would see every join fail at once with the old error.
  std::shared_ptr<cclo::v1::Peer::Stub> StubFor(const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  mutable absl::Mutex mu_;
  std::map<std::string, Channel> channels_ ABSL_GUARDED_BY(mu_);
  uint64_t uses_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);  ///< joins in progress
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cclo::daemon
