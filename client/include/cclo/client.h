// libcclo: the application's connection to the local cclod.
//
//   auto client = cclo::Client::Attach("/run/cclod");            // one session
//   auto buffer = (*client)->AllocBuffer(1 << 20);                // shared memory
//   auto comm = (*client)->Join(token, rank, size);               // token from any rank
//   (*comm)->Allreduce(*buffer, *buffer, n, cclo::DataType::kFloat32, cclo::ReduceOp::kSum);
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cclo/buffer.h"
#include "cclo/communicator.h"
#include "cclo/request.h"

namespace cclo {

/// One session with the local cclod.
///
/// The session lives as long as the Client: destroying it closes the attach socket, and the
/// daemon then cancels the session's ops, frees its buffers and leaves its communicators.
/// Communicators and Requests keep the connection state alive but fail once the session is
/// gone: FAILED_PRECONDITION ("the session is closed") once the Client was destroyed,
/// UNAVAILABLE once the daemon ended it (it stopped, died or restarted: "cclod ended the
/// session (attach socket <runtime_dir>/attach.sock closed)"), calls under way then too.
/// Buffers stay mapped, with what they held, until destroyed; attach a new Client once the
/// daemon is back. Methods are thread-safe. Errors carry the daemon's message.
///
/// fork(): a Client, its Communicators, Requests and Buffers belong to the process that
/// attached. In a forked child every call on them fails with FAILED_PRECONDITION (the
/// command and completion rings are shared memory the child inherited; using them would
/// corrupt the parent's session), and destroying them there touches nothing of the
/// parent's. Nor can a child attach a Client of its own: once libcclo attached in a process,
/// Attach in a child forked from it is FAILED_PRECONDITION, as gRPC does not work after a
/// fork (the child's calls would go out on the parent's connection to cclod, whose own calls
/// then hang until their deadline, and would have no deadline themselves). A child that needs
/// a session execs a program that attaches (libcclo's fds are close-on-exec). The child
/// closes its copy of the attach socket at the fork, so the session ends when the process
/// that attached destroys its Client or exits, whatever its forked children do.
class Client {
 public:
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  /// Attaches to the cclod whose runtime directory is `runtime_dir` (it holds attach.sock
  /// and client.sock). `timeout` bounds the handshake and is the deadline of every plain
  /// RPC of the session; one that is not positive is INVALID_ARGUMENT. A daemon that refuses the
  /// caller gives its reason: PERMISSION_DENIED for a caller of no tenant, RESOURCE_EXHAUSTED when
  /// the tenant's sessions quota is full; an unreachable one UNAVAILABLE, and one that dies or
  /// stops during the attach UNAVAILABLE at once, naming its socket.
  static absl::StatusOr<std::unique_ptr<Client>> Attach(const std::string& runtime_dir,
                                                        absl::Duration timeout = absl::Seconds(10));

  /// The daemon's id of this session.
  uint64_t session_id() const;

  /// Allocates a shared-memory buffer of at least `bytes` bytes, charged to the tenant. Its
  /// memory is taken (and zeroed) at once and charged to this process's memory cgroup (not
  /// the daemon's); past this process's memory limit the kernel kills it here.
  absl::StatusOr<Buffer> AllocBuffer(uint64_t bytes);

  /// Releases `buffer` at the daemon and unmaps it here, leaving it empty. When the daemon
  /// does not release it (the error says why), or it is another Client's (INVALID_ARGUMENT),
  /// `buffer` is left as it was, still mapped.
  /// Ops in flight that use it go on; the daemon keeps its memory, charged to the tenant,
  /// until they end.
  absl::Status FreeBuffer(Buffer&& buffer);

  /// Makes a new communicator token with this daemon as root; hand it to every rank. Its
  /// ranks choose algorithms by this daemon's current policy, whose rules may match
  /// `label` (empty, or 1 to 64 of a-z, A-Z, 0-9, '_', '.', '-'); a label that is not
  /// UTF-8 text is INVALID_ARGUMENT here, naming its first byte that is not.
  absl::StatusOr<std::string> CreateCommunicatorId(const std::string& label = "");

  /// Joins the communicator of `token` as `rank` of `size`; returns once all ranks joined,
  /// or fails when they did not within `timeout` (the RPC deadline is `timeout` plus the
  /// session's RPC timeout, and the daemon gives up by it: a zero timeout takes the
  /// daemon's join_timeout_ms, cut to the session's RPC timeout). The daemon waits at most
  /// its join_timeout_ms, and the root daemon for the ranks at most its own, whatever
  /// `timeout` asks; a root that cannot be reached, or does
  /// not answer within the timeout, fails the join with UNAVAILABLE. A token made by a
  /// client of another tenant is PERMISSION_DENIED; a token that is not UTF-8 text is
  /// INVALID_ARGUMENT here, naming its first byte that is not.
  absl::StatusOr<std::unique_ptr<Communicator>> Join(const std::string& token, uint32_t rank,
                                                     uint32_t size,
                                                     absl::Duration timeout = absl::Seconds(60));

  /// MPI_Comm_split: every rank of `parent` calls this (it is a collective on `parent`).
  /// The ranks that pass the same `color` (>= 0) form a new communicator, ranked by
  /// (`key`, parent rank); it is returned once all of them joined. The two exchanges on
  /// `parent` and the join share `timeout` (zero: each takes the daemon's default). Past
  /// it the split fails: DEADLINE_EXCEEDED, or UNAVAILABLE where another rank's expired
  /// exchange broke `parent` first (an expired exchange breaks `parent`). A negative color
  /// (MPI_UNDEFINED) takes part in the exchanges and returns nullptr. The new
  /// communicator's root daemon is that of its first member.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(Communicator& parent, int32_t color,
                                                      int32_t key,
                                                      absl::Duration timeout = absl::Seconds(60));

 private:
  explicit Client(std::shared_ptr<client::Session> session) : session_(std::move(session)) {}

  std::shared_ptr<client::Session> session_;
};

}  // namespace cclo
