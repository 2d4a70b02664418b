// A communicator: one rank's membership in a group spanning daemons, and the ops on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cclo/buffer.h"
#include "cclo/request.h"
#include "hw/types.h"

namespace cclo {
namespace v1 {
class SubmitRequest;
}

/// Element types and reductions; the values are those of the cclo.v1 protocol.
using DataType = hw::DataType;
using ReduceOp = hw::ReduceOp;

/// Per-op settings; the defaults leave every choice to the daemon.
struct OpOptions {
  /// Algorithm to force, by registry name (e.g. "ring"); empty = the daemon's policy.
  std::string algorithm;
  /// Op deadline from submission; zero = the daemon's default.
  absl::Duration timeout = absl::ZeroDuration();
};

/// This process's rank in a communicator (from Client::Join).
///
/// Ops on one communicator run in submission order on every rank, one after another, the
/// *Async forms too: a rank's receive queued before its send waits for its peer's send,
/// so order pairs so that they meet (e.g. in a ring, even ranks send first, odd ranks
/// receive first). A rank does not send to itself. Every op comes in two forms: blocking
/// (returns the op's result) and *Async (returns a Request once the daemon queued the op).
/// Offsets are in bytes, counts in elements. Methods are thread-safe; the buffers must
/// outlive the ops that use them.
class Communicator {
 public:
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  /// Forgets the handle locally; the daemon releases it on Destroy() or at session end.
  ~Communicator() = default;

  /// This process's rank, 0 <= rank() < size().
  uint32_t rank() const { return rank_; }
  /// Number of ranks.
  uint32_t size() const { return size_; }
  /// Communicator id in hex, as ccloctl shows it.
  const std::string& id_hex() const { return id_hex_; }
  /// The session's handle for this membership.
  uint64_t handle() const { return handle_; }

  /// Sends `count` elements at byte `offset` of `buffer` to rank `peer` with `tag`.
  absl::Status Send(const Buffer& buffer, uint64_t offset, uint64_t count, DataType type,
                    uint32_t peer, uint32_t tag, const OpOptions& options = {});
  absl::StatusOr<Request> SendAsync(const Buffer& buffer, uint64_t offset, uint64_t count,
                                    DataType type, uint32_t peer, uint32_t tag,
                                    const OpOptions& options = {});

  /// Receives `count` elements from rank `peer` with `tag` into byte `offset` of `buffer`.
  absl::Status Recv(Buffer& buffer, uint64_t offset, uint64_t count, DataType type, uint32_t peer,
                    uint32_t tag, const OpOptions& options = {});
  absl::StatusOr<Request> RecvAsync(Buffer& buffer, uint64_t offset, uint64_t count, DataType type,
                                    uint32_t peer, uint32_t tag, const OpOptions& options = {});

  /// Broadcasts `count` elements at byte `offset` of `buffer` from rank `root` to all ranks
  /// (the root's buffer is the source, every other rank's the destination).
  absl::Status Bcast(Buffer& buffer, uint64_t offset, uint64_t count, DataType type, uint32_t root,
                     const OpOptions& options = {});
  absl::StatusOr<Request> BcastAsync(Buffer& buffer, uint64_t offset, uint64_t count, DataType type,
                                     uint32_t root, const OpOptions& options = {});

  /// Reduces the first `count` elements of `send` over all ranks with `op` into the first
  /// `count` elements of `recv` on every rank. `send` and `recv` may be the same buffer.
  absl::Status Allreduce(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                         ReduceOp op, const OpOptions& options = {});
  absl::StatusOr<Request> AllreduceAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                         DataType type, ReduceOp op, const OpOptions& options = {});

  /// Leaves the communicator at the daemon; later ops on it fail with FAILED_PRECONDITION.
  absl::Status Destroy();

 private:
  friend class Client;
  Communicator(std::shared_ptr<client::Session> session, uint64_t handle, uint32_t rank,
               uint32_t size, std::string id_hex);

  // Fills the communicator and option fields of `request`, submits it and returns its Request.
  absl::StatusOr<Request> Submit(v1::SubmitRequest& request, const OpOptions& options);

  std::shared_ptr<client::Session> session_;
  uint64_t handle_;
  uint32_t rank_;
  uint32_t size_;
  std::string id_hex_;
  std::atomic<bool> destroyed_ = false;  // set once by Destroy(); read by every op
};

}  // namespace cclo
