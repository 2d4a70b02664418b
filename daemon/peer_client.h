// Calls to other daemons' Peer service, over one channel per address while joins use it.
// Departures travel in-band on the data sessions (BYE with the reason), after the data sent
// before them, so no out-of-band notice can overtake data still on its way.
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
  /// How long past a join's deadline the root daemon's answer is still awaited: the root
  /// answers by 9/10 of the join's time counted from when it got the join (JoinTimeoutMs),
  /// which a loaded machine may deliver after the deadline; one not come by then, never.
  static constexpr absl::Duration kRootAnswerGrace = absl::Seconds(1);

  /// Dials every peer with `credentials` (TLS or plaintext, see peer_tls.h).
  explicit PeerClient(std::shared_ptr<grpc::ChannelCredentials> credentials)
      : credentials_(std::move(credentials)) {}

  /// Joins a rank at the root daemon through `context` (blocks until the root answers,
  /// kRootAnswerGrace past `deadline`, Stop, or the caller's context.TryCancel(), which fails
  /// it with CANCELLED, also when called before the join began). A root that did not answer
  /// by then fails it with UNAVAILABLE, as one it cannot connect to.
  absl::StatusOr<cclo::v1::PeerJoinResponse> Join(const std::string& root_address,
                                                  const cclo::v1::PeerJoinRequest& request,
                                                  hw::SteadyTime deadline,
                                                  grpc::ClientContext& context);

  /// Ends the joins in progress and refuses later ones with ShuttingDown(): the daemon stops.
  void Stop();

  /// How many channels are open: one per address that joins are in progress at.
  size_t channels() const;

 private:
  struct Channel {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<cclo::v1::Peer::Stub> stub;
    int joins = 0;  ///< in progress at the address; the last to end closes the channel
  };

  /// The stub for a join at `address`, shared with the joins in progress there (a
  /// daemon's ranks join together), made anew when its channel failed to connect: gRPC
  /// then backs off reconnecting (up to two minutes), and a root daemon restarted on the
  /// address meanwhile would see every join fail at once with the old error. No channel
  /// outlives its joins: a root drops a connection whose pings a partition cut off, and a
  /// channel kept idle meanwhile would learn it only from the next join, which fails with
  /// the reset. Release it with EndJoin.
  std::shared_ptr<cclo::v1::Peer::Stub> StubFor(const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// A join at `address` ended; the last one closes its channel.
  void EndJoin(const std::string& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  mutable absl::Mutex mu_;
  std::map<std::string, Channel> channels_ ABSL_GUARDED_BY(mu_);
  std::set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);  ///< joins in progress
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cclo::daemon
