// A communicator: one rank's membership in a group spanning daemons, and the ops on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cclo/buffer.h"
#include "cclo/request.h"
#include "hw/types.h"

namespace cclo {
namespace v1 {
class SubmitRequest;
}
namespace client {
class RpcPath;
}

/// Element types and reductions; the values are those of the cclo.v1 protocol.
using DataType = hw::DataType;
using ReduceOp = hw::ReduceOp;

/// Per-op settings; the defaults leave every choice to the daemon.
struct OpOptions {
  /// Algorithm to force, by registry name (e.g. "ring"); empty = the daemon's policy.
  std::string algorithm;
  /// Op deadline from submission, time spent waiting for `after` included; zero = the
  /// daemon's default. Past it the op ends with DEADLINE_EXCEEDED and the communicator
  /// breaks (the other ranks could not finish the op without this one).
  absl::Duration timeout = absl::ZeroDuration();
  /// MPI_IN_PLACE: the input is taken from `recv` (where docs/collectives.md says) and
  /// `send` is not read. For scatter, gather and reduce it applies at the root and is
  /// ignored at the other ranks, so every rank may pass the same options. Collectives
  /// without an in-place form (send, recv, bcast, barrier) refuse it (INVALID_ARGUMENT).
  /// Without it, `send` and `recv` must not overlap (INVALID_ARGUMENT), except that one
  /// buffer for both is the in-place form of allreduce, reduce_scatter, alltoall and
  /// reduce at the root.
  bool in_place = false;
  /// Requests of this Client's ops that this op waits for (ACCL's `waitfor`): the daemon
  /// hands it to the engine only once all of them finished OK, and ops submitted after it
  /// on this communicator wait behind it. If one of them failed or was cancelled, this op
  /// ends with ABORTED naming it (at submission already when this process knows the
  /// failure). The pointers are read during the call only; other threads may Wait on those
  /// requests meanwhile.
  std::vector<const Request*> after;
  /// When the tenant already has as many ops in flight as its quota allows: false fails
  /// the submission at once with RESOURCE_EXHAUSTED (naming the quota and a retry hint);
  /// true waits for room until the op's deadline (with the daemon's default deadline, this
  /// process stops waiting after 10 minutes). Ops keep their order: while one op of this
  /// Client waits for room, a later one that does not wait fails at once, and one that
  /// waits queues behind it.
  bool wait_for_room = false;
};

/// This process's rank in a communicator (from Client::Join).
///
/// Ops on one communicator run in submission order on every rank, the *Async forms too: a
/// collective starts once every op before it finished, and ops after it wait for it.
/// Sends and receives are the exception, as MPI's nonblocking ones: one starts once the
/// ops before it are sends or receives that started, so a rank's consecutive sends and
/// receives run side by side (post a receive, then a send, and both go at once). Between
/// two ranks, sends of one tag meet receives in the order each rank submitted them. A
/// send or receive whose buffer range overlaps what an earlier one under way writes (or
/// that writes what it reads) waits for it, and so does every op after it: forwarding
/// what a receive fills works, but two ranks that each receive into a buffer and then
/// send from it wait on each other (use a second buffer, as MPI requires). A rank may
/// send to itself. Every op comes in two forms: blocking (returns the op's result)
/// and *Async (returns a Request once the daemon queued the op).
/// Collectives take whole buffers from their start, sized per rank as in MPI (count is
/// what one rank contributes or receives; docs/collectives.md lists every layout); send,
/// recv and bcast take a byte offset. Counts are in elements. A buffer this rank does not use
/// in an op (the send buffer of scatter away from the root, the receive buffer of gather
/// and reduce away from the root) is not read or written; any buffer may be passed.
/// Methods are thread-safe; the buffers must outlive the ops that use them, and be this
/// Client's (another Client's is INVALID_ARGUMENT: buffer.h).
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

  /// Sends `count` elements at byte `offset` of `buffer` to rank `peer` with `tag`, any
  /// value but 2^32 - 1, which collectives use (INVALID_ARGUMENT), as for Recv.
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

  /// Splits the root's `send` into size() chunks of `count` elements and delivers chunk i
  /// to rank i, into the first `count` elements of its `recv`. `send` (size() * count
  /// elements) is read at the root only. In place at the root: `recv` holds all size()
  /// chunks and the root's own chunk stays where it is.
  absl::Status Scatter(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                       uint32_t root, const OpOptions& options = {});
  absl::StatusOr<Request> ScatterAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                       DataType type, uint32_t root, const OpOptions& options = {});

  /// Collects the first `count` elements of every rank's `send` at the root: chunk i of
  /// the root's `recv` (size() * count elements) comes from rank i. In place at the root:
  /// the root's contribution is already at chunk `root` of `recv`.
  absl::Status Gather(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                      uint32_t root, const OpOptions& options = {});
  absl::StatusOr<Request> GatherAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                      DataType type, uint32_t root, const OpOptions& options = {});

  /// Gather to every rank: chunk i of each rank's `recv` (size() * count elements) is the
  /// first `count` elements of rank i's `send`. In place: this rank's contribution is
  /// already at chunk rank() of `recv`.
  absl::Status Allgather(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                         const OpOptions& options = {});
  absl::StatusOr<Request> AllgatherAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                         DataType type, const OpOptions& options = {});

  /// Reduces the first `count` elements of every rank's `send` with `op` into the first
  /// `count` elements of the root's `recv`. At the root `send` and `recv` may be the same
  /// buffer (then it runs in place). In place at the root: the root's contribution is in
  /// `recv`.
  absl::Status Reduce(const Buffer& send, Buffer& recv, uint64_t count, DataType type, ReduceOp op,
                      uint32_t root, const OpOptions& options = {});
  absl::StatusOr<Request> ReduceAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                      DataType type, ReduceOp op, uint32_t root,
                                      const OpOptions& options = {});

  /// Reduces the first `count` elements of `send` over all ranks with `op` into the first
  /// `count` elements of `recv` on every rank. `send` and `recv` may be the same buffer
  /// (then it runs in place). In place: the contribution is in `recv`.
  absl::Status Allreduce(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                         ReduceOp op, const OpOptions& options = {});
  absl::StatusOr<Request> AllreduceAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                         DataType type, ReduceOp op, const OpOptions& options = {});

  /// Reduces every rank's `send` (size() chunks of `count` elements) with `op` and leaves
  /// chunk i of the result in the first `count` elements of rank i's `recv`. `send` and
  /// `recv` may be the same buffer (then it runs in place). In place: `recv` holds the
  /// size() * count input elements and the result lands in its first `count`.
  absl::Status ReduceScatter(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                             ReduceOp op, const OpOptions& options = {});
  absl::StatusOr<Request> ReduceScatterAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                             DataType type, ReduceOp op,
                                             const OpOptions& options = {});

  /// Every rank sends chunk i of its `send` (size() chunks of `count` elements) to rank i,
  /// which stores it as chunk `rank()` of its `recv` (size() * count elements). `send` and
  /// `recv` may be the same buffer (then it runs in place). In place: `recv` holds the
  /// outgoing chunks and receives the incoming ones.
  absl::Status Alltoall(const Buffer& send, Buffer& recv, uint64_t count, DataType type,
                        const OpOptions& options = {});
  absl::StatusOr<Request> AlltoallAsync(const Buffer& send, Buffer& recv, uint64_t count,
                                        DataType type, const OpOptions& options = {});

  /// Returns once every rank has entered the barrier.
  absl::Status Barrier(const OpOptions& options = {});
  absl::StatusOr<Request> BarrierAsync(const OpOptions& options = {});

  /// Does nothing at the engine and involves no other rank: the round trip of one op
  /// through the daemon (submission, scheduling, completion), as benchmarks time it.
  absl::Status Nop(const OpOptions& options = {});
  absl::StatusOr<Request> NopAsync(const OpOptions& options = {});

  /// Leaves the communicator at the daemon; later ops on it fail with FAILED_PRECONDITION.
  /// Ops of this rank still in flight end with UNAVAILABLE ("rank R destroyed the
  /// communicator") when no other rank of it is on this daemon; while one is, they run on
  /// until they finish or reach their deadline. One still held for its `after` ends so once
  /// those finished, either way. Their Requests stay valid. Ops of other ranks that still
  /// need this one fail with UNAVAILABLE naming the reason, on this daemon as on others.
  /// Calls from several threads at once go one after the other: once one succeeded, the
  /// rest return OK, as later calls do.
  absl::Status Destroy();

 private:
  friend class Client;
  friend class client::RpcPath;  // cclo-bench's nop through the Submit and Wait RPCs
  Communicator(std::shared_ptr<client::Session> session, uint64_t handle, uint32_t rank,
               uint32_t size, std::string id_hex);

  // FAILED_PRECONDITION "communicator X was destroyed" once Destroy() succeeded; OK before.
  // With `wait`, first waits for a Destroy() in progress in another thread: the daemon
  // refuses the handle from when that call released it until it returns.
  absl::Status CheckNotDestroyed(bool wait = false);
  // Fills the communicator and option fields of `request`, submits it and returns its Request.
  absl::StatusOr<Request> Submit(v1::SubmitRequest& request, const OpOptions& options);
  // Submits a collective with the buffers its contract asks of this rank, each from offset
  // 0 (`send`/`recv` are not touched where the contract uses no buffer; null for barrier).
  absl::StatusOr<Request> SubmitCollective(hw::Collective collective, const Buffer* send,
                                           Buffer* recv, uint64_t count, DataType type, ReduceOp op,
                                           uint32_t root, const OpOptions& options);

  std::shared_ptr<client::Session> session_;
  uint64_t handle_;
  uint32_t rank_;
  uint32_t size_;
  std::string id_hex_;
  std::atomic<bool> destroyed_ = false;  // set once by Destroy(); read by every op
  absl::Mutex destroy_mutex_;            // one Destroy() at a time
};

}  // namespace cclo
