// Calls to other daemons' Peer service: channels cached by address, Leave notices sent
// by one background worker so no caller waits on a slow or dead peer.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cclo/v1/peer.grpc.pb.h"

namespace cclo::daemon {

class PeerClient {
 public:
  PeerClient();
  /// Sends the queued notices that are still due, then stops the worker.
  ~PeerClient();

  /// Joins a rank at the root daemon (blocks until the root answers or `deadline`).
  absl::StatusOr<cclo::v1::PeerJoinResponse> Join(const std::string& root_address,
                                                  const cclo::v1::PeerJoinRequest& request,
                                                  absl::Time deadline);

  /// Queues a Leave notice to `address`; sent in the background with a short deadline.
  void NotifyLeave(const std::string& address, cclo::v1::PeerLeaveRequest request);

  /// Sends a Leave notice now and waits at most `timeout`.
  absl::Status Leave(const std::string& address, const cclo::v1::PeerLeaveRequest& request,
                     absl::Duration timeout);

 private:
  cclo::v1::Peer::Stub* StubFor(const std::string& address);
  void RunNotices();

  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<cclo::v1::Peer::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, cclo::v1::PeerLeaveRequest>> notices_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace cclo::daemon
