// Calls to other daemons' Peer service, over one channel per root and communicator while
// joins of that communicator use it. Departures travel in-band on the data sessions (BYE
// with the reason), after the data sent before them, so no out-of-band notice can overtake
// data still on its way.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/security/credentials.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>

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

  /// How long a channel whose joins ended while it was still connecting is kept for its
  /// connection to settle (kConnectTimeout ends it sooner).
  static constexpr absl::Duration kConnectingGrace = absl::Minutes(1);

  /// How long a join waits before it tries again at a root that reset its connection
  /// unread; each wait after is twice the one before, up to kMaxRetryPause.
  static constexpr absl::Duration kRetryPause = absl::Milliseconds(100);
  /// The longest wait between two tries; a try again also needs as long left after its
  /// wait, for the root to gather in.
  static constexpr absl::Duration kMaxRetryPause = absl::Seconds(1);

  /// How long a connection to a root may take to be made, TLS and HTTP/2 handshakes
  /// included (gRPC's connect timeout, set on every channel).
  static constexpr absl::Duration kConnectTimeout = absl::Seconds(20);

  /// How much of a root daemon's error its joins' errors and the log keep (escaped): a
  /// whole message's room (gRPC's TLS errors run to 200 bytes), not a flood's.
  static constexpr size_t kMaxRootErrorBytes = 1024;

  /// Dials every peer with `credentials` (TLS or plaintext, see peer_tls.h). Start() before
  /// the first join.
  explicit PeerClient(std::shared_ptr<grpc::ChannelCredentials> credentials);
  /// Every join has ended. Stops as Stop() does, so it waits for no connection to settle.
  ~PeerClient();

  /// Starts the thread that closes the channels kept for their connection to settle
  /// (UNAVAILABLE if no thread can be had). Call once.
  absl::Status Start();

  /// A join in progress, for whoever may end it. It must outlive the join and every
  /// reference its holders keep: Communicators and PeerClient (calls_) drop theirs under the
  /// locks they cancel under.
  class Call {
   public:
    /// Fails the join with CANCELLED, whichever try it is in or waits for, also when called
    /// before the join began.
    void Cancel();

   private:
    friend class PeerClient;
    /// Makes `context` the try in progress; false (and no try) once cancelled.
    bool Begin(grpc::ClientContext* context);
    /// The try of Begin ended: its context is no longer cancelled.
    void End();
    /// Waits until `until` or Cancel().
    void Pause(hw::SteadyTime until);

    absl::Mutex mu_;
    bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
    grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  ///< the try in progress
  };

  /// Joins a rank at the root daemon as `call` (blocks until the root answers,
  /// kRootAnswerGrace past `deadline`, Stop, or call.Cancel()), each try giving the root
  /// 9/10 of the time it has left (request.timeout_ms, JoinTimeoutMs). A root that did not
  /// answer by then fails it with UNAVAILABLE, as one it cannot connect to; its errors come
  /// escaped and cut (kMaxRootErrorBytes). A connection the root reset unread (its peer
  /// port, paused for want of descriptors, resets the connections queued meanwhile once it
  /// serves again) is tried again, kRetryPause and longer after, while the deadline leaves
  /// room, each try again logged and counted (retries()); any other failure to connect (a
  /// refused connection, a TLS handshake that failed, none made within kConnectTimeout)
  /// fails the join at once. The join dials the root on a channel that only the joins of
  /// its communicator (request.comm_id()) and tenant (request.tenant(); one tenant's joins
  /// wait on no connection another's holds) in progress here share, made by the first of
  /// them and closed when the last ends (a daemon's ranks joining together open one
  /// connection, and TLS handshake, between them), and made anew once it failed to connect:
  /// a root drops a connection whose pings a partition cut off, which the joining daemon
  /// cannot learn while cut off, so a channel kept after its joins or shared with another
  /// communicator's join in progress (one waiting at the root throughout) could send the
  /// join on the dropped connection, where it fails at once with the reset; and one that
  /// failed to connect backs off its reconnects (20 s and longer), so a root restarted
  /// meanwhile would see the join fail at once with the old error. A dropped connection
  /// that the joins of one communicator share fails nothing that could have formed: the
  /// rank waiting on it would never get the root's answer.
  absl::StatusOr<cclo::v1::PeerJoinResponse> Join(const std::string& root_address,
                                                  const cclo::v1::PeerJoinRequest& request,
                                                  hw::SteadyTime deadline, Call& call);

  /// Ends the joins in progress and refuses later ones with ShuttingDown(): the daemon stops.
  /// Closes the channels kept for their connection to settle, and those of the joins it
  /// ends, at once: their connections end with the process, whose stop must not wait for
  /// a root that hangs (up to kConnectTimeout, or kConnectingGrace).
  void Stop();

  /// How many channels are open: one per root, communicator and tenant that joins are in
  /// progress at, and those kept until their connection settles.
  size_t channels() const;

  /// How many times joins tried again since the start, each after a try whose connection
  /// the root reset (ranks of one communicator sharing one such connection count one each).
  uint64_t retries() const { return retries_.load(std::memory_order_relaxed); }

 private:
  /// The root's address, the communicator's id and the joining ranks' tenant.
  using ChannelKey = std::tuple<std::string, std::string, std::string>;
  struct Channel {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<cclo::v1::Peer::Stub> stub;  ///< on `channel`
    int joins = 0;  ///< in progress on it; the last to end closes the channel
  };

  /// The stub for a join of `key`, shared with that communicator's joins in progress at
  /// that root, or on a new channel when there are none. Release it with EndJoin.
  std::shared_ptr<cclo::v1::Peer::Stub> StubFor(const ChannelKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// A try of `key` on `stub` failed to connect: the channel is made anew for the joins of
  /// `key` (unless another's failed try did so already), and `stub` becomes its stub.
  /// Returns the failed try's stub, which holds the failed channel, for the caller to close
  /// at once outside the lock: a channel whose connection failed before kConnectTimeout
  /// does not connect again until kConnectTimeout after it began (Dial), so closing it
  /// leaks nothing. One that timed out is connecting again already (gRPC 1.51 dials at once
  /// then); closing it leaks the connection if the root serves it later, as EndJoin's
  /// closing of such a channel did before joins were tried again.
  std::shared_ptr<cclo::v1::Peer::Stub> Redial(const ChannelKey& key,
                                               std::shared_ptr<cclo::v1::Peer::Stub>& stub)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Makes `channel`'s channel and stub, to the root of `key`.
  void Dial(const ChannelKey& key, Channel& channel);
  /// A join of `key` ended; the last one closes its channel, or, while the channel still
  /// connects (the root has not finished its handshake: stopped, hung, or slow), has it
  /// closed once it is connected or failed: gRPC (1.51) leaks the connection of a channel
  /// destroyed mid-handshake, left open at both ends for good (the root's keepalive pings
  /// answered), a descriptor at each daemon per such join.
  void EndJoin(const ChannelKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Closes the channels EndJoin keeps, each once its connection settles (closing_queue_).
  void CloseSettled();

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  mutable absl::Mutex mu_;
  std::map<ChannelKey, Channel> channels_ ABSL_GUARDED_BY(mu_);
  std::set<Call*> calls_ ABSL_GUARDED_BY(mu_);  ///< joins in progress
  std::atomic<uint64_t> retries_ = 0;           ///< retries()
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  /// Channels whose joins ended while they connected, by their address (the tag of their
  /// state change on closing_queue_).
  std::map<void*, std::shared_ptr<grpc::Channel>> closing_ ABSL_GUARDED_BY(mu_);
  grpc::CompletionQueue closing_queue_;
  std::thread closer_;  ///< runs CloseSettled from Start() on
};

}  // namespace cclo::daemon
