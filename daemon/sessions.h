// Attached client sessions: identity, owned buffers, communicator handles and ops.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/buffers.h"
#include "hw/device.h"

namespace cclo::daemon {

/// Who is on the other end of an attach connection (from SO_PEERCRED).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// A finished op as Wait reports it.
struct OpResult {
  hw::Completion completion;
  absl::Duration elapsed;
};

/// One client session. Thread-safe.
class Session {
 public:
  Session(uint64_t id, std::string token, PeerCredentials credentials, int attach_fd)
      : id_(id), token_(std::move(token)), credentials_(credentials), attach_fd_(attach_fd) {}

  uint64_t id() const { return id_; }
  const std::string& token() const { return token_; }
  const PeerCredentials& credentials() const { return credentials_; }
  /// Sends the buffer's fd to the client, then records the buffer. The send holds only
  /// `send_mu_` (never `mu_`, which op completions on the engine thread take) and is
  /// bounded by the attach socket's send timeout, so a client that stops reading fails
  /// its own AllocBuffer and stalls no one else.
  absl::Status AddBuffer(SharedBufferPtr buffer);
  absl::Status RemoveBuffer(uint64_t buffer_id);
  /// The buffer if this session owns it, else NOT_FOUND (never says whose it is).
  absl::StatusOr<SharedBufferPtr> FindBuffer(uint64_t buffer_id) const;
  uint64_t BufferBytes() const;
  size_t BufferCount() const;

  void AddCommHandle(uint64_t handle);
  bool RemoveCommHandle(uint64_t handle);
  std::vector<uint64_t> CommHandles() const;

  /// Registers a new op and returns its id.
  uint64_t StartOp();
  /// Stores an op's result and wakes its waiters.
  void FinishOp(uint64_t op_id, OpResult result);
  /// Waits until the op is done or `timeout` passes. Done ops are released on return.
  /// NOT_FOUND for ids this session never issued or already collected (also when a
  /// concurrent Wait collected it first).
  absl::StatusOr<std::optional<OpResult>> WaitOp(uint64_t op_id, absl::Duration timeout);
  /// Marks the session closed; pending waits wake and fail.
  void Close();
  /// Whether Close() was called (the client is gone).
  bool closed() const;

 private:
  const uint64_t id_;
  const std::string token_;
  const PeerCredentials credentials_;
  const int attach_fd_;

  /// Serialises frames on the attach socket and orders them before Close().
  absl::Mutex send_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<uint64_t, SharedBufferPtr> buffers_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> comm_handles_ ABSL_GUARDED_BY(mu_);
  /// Op id -> result once finished (nullopt while running).
  std::map<uint64_t, std::optional<OpResult>> ops_ ABSL_GUARDED_BY(mu_);
  uint64_t next_op_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

using SessionPtr = std::shared_ptr<Session>;

/// All live sessions, by token and by id. Thread-safe.
class SessionRegistry {
 public:
  SessionPtr Create(PeerCredentials credentials, int attach_fd);
  /// The session holding `token`, or UNAUTHENTICATED.
  absl::StatusOr<SessionPtr> FindByToken(const std::string& token) const;
  /// Removes and returns the session (nullptr if unknown).
  SessionPtr Remove(uint64_t session_id);
  std::vector<SessionPtr> All() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, SessionPtr> by_token_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, SessionPtr> by_id_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace cclo::daemon
