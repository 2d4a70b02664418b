// The state one libcclo session shares between Client, Communicator and Request: the
// attach socket, the gRPC stub for client.sock, the session token and the session's rings.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cclo/v1/attach.h"
#include "cclo/v1/client.grpc.pb.h"
#include "client/ring.h"
#include "grpcpp/grpcpp.h"
#include "hw/clock.h"

namespace cclo::client {

/// An attached session. Thread-safe.
class Session {
 public:
  /// Connects attach.sock in `runtime_dir`, says HELLO, expects WELCOME, then opens the
  /// gRPC channel to client.sock. `timeout` bounds all of it and becomes rpc_timeout();
  /// INVALID_ARGUMENT unless it is positive.
  static absl::StatusOr<std::shared_ptr<Session>> Open(const std::string& runtime_dir,
                                                       absl::Duration timeout);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Closes the attach socket, which ends the session at the daemon, after closing the ring
  /// (ClientRing::Close: later ops and RPCs fail before they reach the daemon). Idempotent.
  /// In a forked child (whose copy of the attach socket was closed at the fork) it closes
  /// the child's copies of the other fds, without waiting for a lock another thread held at
  /// the fork.
  void Close();

  /// The daemon's session id.
  uint64_t id() const { return id_; }
  /// Deadline of a plain RPC.
  absl::Duration rpc_timeout() const { return rpc_timeout_; }
  /// The Client service stub (thread-safe).
  v1::Client::Stub& stub() { return *stub_; }
  /// The command and completion rings every op goes through (thread-safe).
  ClientRing& ring() { return *ring_; }

  /// Converts an RPC failure to absl::Status naming the RPC: "<rpc>: <message>", with the
  /// daemon's code, unless the session is over, whatever the daemon answered a token it no
  /// longer knows or gRPC's CANCELLED for a call that came as it stopped: UNAVAILABLE when
  /// the daemon ended it (it stopped, died, restarted, or dropped the session),
  /// FAILED_PRECONDITION when this process closed it (its Client was destroyed), as the
  /// command ring reports either. A call whose connection to client.sock broke under it waits
  /// up to kHangupGrace for the attach socket to close: a daemon that died closes its sockets
  /// one after the other.
  absl::Status FromGrpc(const grpc::Status& status, const std::string& rpc);

  /// Adds the session metadata and a deadline `timeout` from now to `context`.
  void Prepare(grpc::ClientContext& context, absl::Duration timeout) const;

  /// Marks an AllocBuffer as under way and returns its number. From here until
  /// EndAllocation its BUFFER frame may come (the daemon sends it before the RPC answers),
  /// so frames read meanwhile are kept for it. Every call must be followed by EndAllocation.
  uint64_t BeginAllocation();

  /// Ends allocation `allocation`, whether it took its frame or not (its RPC failed, or its
  /// TakeBuffer). Returns the ids of the buffers whose frames no allocation under way can
  /// claim any longer: the daemon made them for a caller that did not learn their id (its
  /// RPC failed here after the daemon sent the frame). Their fds are closed here; the caller
  /// gives the buffers back to the daemon (FreeBuffer), which still charges them to the
  /// tenant. A frame still unread on the attach socket is found by the next allocation.
  std::vector<uint64_t> EndAllocation(uint64_t allocation);

  /// Returns the memfd the daemon sent for `buffer_id` (the caller owns it), reading attach
  /// frames until it arrives or `deadline` passes. Frames for other buffers are kept for
  /// their own callers. Called between BeginAllocation and EndAllocation.
  absl::StatusOr<attach::Received> TakeBuffer(uint64_t buffer_id, hw::SteadyTime deadline);

 private:
  /// Longest wait of FromGrpc for the attach socket of a daemon whose client.sock
  /// connection broke.
  static constexpr absl::Duration kHangupGrace = absl::Seconds(1);

  Session(std::string attach_path, int attach_fd, uint64_t id, std::string token,
          absl::Duration rpc_timeout, std::shared_ptr<grpc::Channel> channel);
  /// OK while the daemon holds the session (the attach socket is open at both ends), waiting
  /// up to `wait` for its end; UNAVAILABLE naming the attach socket once it closed.
  absl::Status Alive(absl::Duration wait = absl::ZeroDuration());
  /// Closes this process's copy of the attach socket (for CloseFds), and in every forked
  /// child right after the fork (the only thread there), so that the daemon ends the session
  /// when the attaching process closes its own, whatever children it forked. Touches only
  /// attach_fd_: a thread of the parent that held attach_mutex_ at the fork may have left
  /// other fields half-changed.
  void DropAttachSocketCopy() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  /// Closes the attach socket and the unclaimed fds. Under attach_mutex_, except in a
  /// forked child: one thread runs there, and the mutex may have been held at the fork.
  void CloseFds() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  /// Whether this is a forked child of the process that attached.
  bool Forked() const { return ring_ != nullptr && !ring_->InAttachingProcess().ok(); }

  const std::string attach_path_;
  const uint64_t id_;
  const std::string token_;
  const absl::Duration rpc_timeout_;
  grpc::Channel* const channel_;            // owned by stub_
  std::unique_ptr<v1::Client::Stub> stub_;  // leaked in a forked child (see ~Session)
  std::unique_ptr<ClientRing> ring_;  // set once by Open

  absl::Mutex attach_mutex_;                      // serialises readers of the attach socket
  int attach_fd_ ABSL_GUARDED_BY(attach_mutex_);  // owned; -1 once closed
  // A BUFFER frame read by one caller on behalf of another. Only allocations numbered below
  // `claimable_below` (those begun before it was read) can claim it; fds owned.
  struct Unclaimed {
    attach::Received received;
    uint64_t claimable_below;
  };
  std::map<uint64_t, Unclaimed> unclaimed_ ABSL_GUARDED_BY(attach_mutex_);  // by buffer id
  std::set<uint64_t> allocations_ ABSL_GUARDED_BY(attach_mutex_);           // under way, by number
  uint64_t next_allocation_ ABSL_GUARDED_BY(attach_mutex_) = 0;
};

/// A timeout as the RPCs carry it: whole milliseconds, 0 for the daemon's default (a zero
/// duration), at least 1 for any positive duration, capped at the field's range;
/// a negative duration is INVALID_ARGUMENT naming `what`.
absl::StatusOr<uint32_t> TimeoutMillis(absl::Duration timeout, const std::string& what);

}  // namespace cclo::client
