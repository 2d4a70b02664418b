// Calls to other daemons' Peer service, over channels cached by address. Departures
// travel in-band on the data sessions (BYE with the reason), after the data sent before
// them, so no out-of-band notice can overtake data still on its way.
#pragma once

#include <grpcpp/security/credentials.h>

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cclo/v1/peer.grpc.pb.h"

namespace cclo::daemon {

class PeerClient {
 public:
  /// Dials every peer with `credentials` (TLS or plaintext, see peer_tls.h).
  explicit PeerClient(std::shared_ptr<grpc::ChannelCredentials> credentials)
      : credentials_(std::move(credentials)) {}

  /// Joins a rank at the root daemon (blocks until the root answers or `deadline`).
  absl::StatusOr<cclo::v1::PeerJoinResponse> Join(const std::string& root_address,
                                                  const cclo::v1::PeerJoinRequest& request,
                                                  absl::Time deadline);

 private:
  cclo::v1::Peer::Stub* StubFor(const std::string& address);

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<cclo::v1::Peer::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cclo::daemon
