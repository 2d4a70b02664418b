// A client session spoken by hand (attach frames + raw gRPC stubs), so tests can send
// requests that libcclo would never build.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cclo/v1/client.grpc.pb.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "cclo/v1/ring.h"

namespace cclo::testing {

/// A Unix stream socket connected to `path`, or -1 with errno set.
int ConnectUnix(const std::string& path);

/// A Peer Join at the daemon whose Peer service is at `peer_address`, for a communicator
/// it does not know, giving `daemon_address` as the joining daemon's: what anyone who
/// reaches the peer port can send. The daemon refuses it (NOT_FOUND) and logs the refusal.
grpc::Status ForeignPeerJoin(const std::string& peer_address, const std::string& daemon_address);

/// The timeout RawSession::Join gives a join unless told.
inline constexpr uint32_t kJoinTimeoutMs = 20'000;

/// An in-place float32 sum allreduce of `count` elements on `buffer`.
cclo::v1::SubmitRequest AllreduceRequest(uint64_t comm_handle, uint64_t buffer, uint64_t count);

class RawSession {
 public:
  /// Attaches to the daemon in `runtime_dir`; aborts the test process on failure.
  explicit RawSession(const std::string& runtime_dir);
  ~RawSession();

  /// Closes the attach connection, which ends the session at the daemon (the rings stay
  /// mapped here).
  void Detach();

  /// A context carrying the session token and a 30 s deadline.
  std::unique_ptr<grpc::ClientContext> Context() const;
  cclo::v1::Client::Stub& stub() { return *stub_; }

  /// AllocBuffer plus the fd frame that follows it; returns the buffer id.
  uint64_t Alloc(uint64_t bytes);

  /// CreateCommunicatorId; aborts on failure.
  std::string NewToken();

  /// JoinCommunicator with a timeout of `timeout_ms` (the call's deadline is Context()'s, or
  /// 10 s past the timeout where that is later); the handle lands in `*handle` when given.
  grpc::Status Join(const std::string& token, uint32_t rank, uint32_t size,
                    uint64_t* handle = nullptr, uint32_t timeout_ms = kJoinTimeoutMs);

  /// DestroyCommunicator of `handle`.
  grpc::Status Destroy(uint64_t handle);

  /// Submit, then Wait (up to `wait_ms`); the Submit error or the op's own status.
  grpc::Status Run(const cclo::v1::SubmitRequest& request, uint32_t wait_ms = 30'000);

  /// The same through the command ring: the command's refusal or the op's own status.
  grpc::Status RunOnRing(const cclo::v1::SubmitRequest& request);
  /// Writes `slot` at the command head as it is, publishes it and rings the doorbell.
  void Post(const ring::CommandSlot& slot);
  /// Writes `slots` from the command head on, then publishes them with one store and one
  /// doorbell, so that the daemon finds them all in one pass (at most kCommandSlots).
  void PostAll(const std::vector<ring::CommandSlot>& slots);
  /// Says that a thread of this client sleeps on the completion doorbell (or no longer),
  /// without sleeping: the daemon then rings it for what it posts.
  void SetSleeping(bool sleeping);
  /// How many times the daemon rang the completion doorbell since the last call, waiting
  /// up to `wait` for a first ring (reading the eventfd clears its count).
  uint64_t TakeDoorbellRings(absl::Duration wait);
  /// Waits until `count` completions are posted and not consumed, touching no doorbell;
  /// aborts the test process after 30 s.
  void AwaitPosted(uint64_t count);
  /// Waits until the daemon has taken every command posted and then says it is about to
  /// sleep (`daemon_sleeping` in the ring header); aborts the test process after 30 s.
  void AwaitDaemonSleeping();
  /// How many commands the daemon has taken (the command ring's tail).
  uint64_t CommandsTaken() const;
  /// Makes both doorbells block (an fd's flags belong to the open file, which any other fd
  /// of it shares) and, if it can write the completion doorbell (as the eventfd of ring
  /// version 1 let it), fills it so that one more ring would block.
  void JamDoorbells();
  /// Publishes `head` as the command head (whatever it is) and rings the doorbell.
  void PublishCommandHead(uint64_t head);
  /// The next completion, consumed without ringing the command doorbell; aborts the test
  /// process after 30 s without one.
  ring::CompletionSlot NextCompletion();
  /// Completion `n` (from 0) of those posted and not consumed, left on the ring (the
  /// daemon keeps the result of an op whose completion is not consumed); AwaitPosted first.
  ring::CompletionSlot Posted(uint64_t n) const;

 private:
  int attach_fd_ = -1;
  std::string token_;
  std::unique_ptr<cclo::v1::Client::Stub> stub_;
  void* rings_ = nullptr;  ///< the session's rings, mapped
  int command_doorbell_ = -1;
  int completion_doorbell_ = -1;
  uint64_t command_head_ = 0;
  uint64_t completion_tail_ = 0;
  uint64_t next_cookie_ = 1;
};

}  // namespace cclo::testing
