// The gRPC Submit and Wait RPCs of a libcclo session, for cclo-bench. libcclo's ops go
// through the session's command ring (client/ring.h); the RPCs stay for tools and other
// languages, and the bench times one beside the other in the same session. Internal: not
// part of libcclo's API (client/include/cclo).
#pragma once

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cclo/communicator.h"

namespace cclo::client {

/// The RPC path of a Communicator's session (a friend of Communicator).
class RpcPath {
 public:
  /// Runs a nop on `comm` through its session's Submit RPC, then Wait RPCs until the op
  /// finished, as libcclo did before the rings. `timeout` is the op's deadline as in
  /// OpOptions::timeout (zero: the daemon's default). Returns the first failed RPC's error
  /// ("Submit: ..." or "Wait: ...") or the op's own status.
  static absl::Status Nop(Communicator& comm, absl::Duration timeout);
};

}  // namespace cclo::client
