// EmuDevice: the software CCLO. One engine thread (the POE's event loop) does all socket
// I/O, program execution, matching, reduction and deadline expiry; the public methods
// only post work to it. Calls run their firmware Program on the DMP; arrivals go through
// the RBM; data sessions come from the TCP POE, two per (communicator, peer engine): the
// one this engine opened carries what it sends, the one the peer opened what it receives.
//
// Protocols (DESIGN 7): a message of at most eager_max_bytes goes eagerly when the link
// has a credit, else by rendezvous (request, clear-to-send, data straight into the posted
// receive). When a link comes up each side reserves up to credits_per_peer rx pool
// buffers for what the other sends and grants them in a credit segment (a communicator is
// ready once every peer's grant arrived); applied eager messages return their credits at
// the end of an engine turn, in batches (Rbm::TakeCredits). Messages between the ranks of a
// communicator on this engine are staged in buffers no link reserved, at most
// credits_per_peer at once per communicator, as if from one more peer; the others wait
// for their receives. A peer that sends beyond its
// credits, more rendezvous requests waiting for their receives than
// rendezvous_waiting_per_peer, data nobody cleared, or a clear-to-send for nothing this
// side sends breaks the communicator, like any invalid data.
//
// Scheduling (DESIGN 9): the DMP's units of engine work wait in a Scheduler, by tenant;
// every turn of the event loop runs about UnitBytes() of them (fair: weighted deficit
// round robin; or FIFO) and then looks for I/O again, so another tenant's small op starts
// after a few units of a big one, not after all of them. Arrivals are not scheduled but
// bounded: the POE reads at most 1 MiB of payload per session and turn, and the RBM
// reduces what landed after each read (OnPayloadPart), so a reduce overlaps the receive.
// While fair scheduling has two or more tenants with engine work (units queued or run,
// or data of their communicators arriving) within the last 50 ms, units and turns are
// at most 64 KiB (kSharedTurnBytes, DeviceStats::turn_bytes).
//
// Failures: when a data session of a configured communicator ends (the peer said BYE,
// hung up or was reset), the ranks that peer hosts have departed. When the session this
// engine sends on ends first, they depart once the peer's ends too (a loss then outranks
// its BYE), or once the handshake timeout has passed, as lost. Whatever they sent before
// is kept: a receive from them whose message fully arrived (now or staged earlier)
// completes; a call that needs anything more of them fails with UNAVAILABLE naming them
// (BYE: "rank N on peer daemon A left: <reason>", or "peer daemon A broke the
// communicator: <reason>" when the peer says it broke it; otherwise "lost peer daemon
// A ..."); calls among the other ranks go on. A rank of this engine that leaves while others
// here stay (DepartLocalRank) departs the same way, here at once and at the peers once its
// own calls are done: then DEPART tells them, and they depart that rank alone as if its
// session had said BYE, the sessions staying up for the others. Invalid data from a peer
// or a missed deadline breaks the whole communicator. RemoveCommunicator and the destructor
// end every session with BYE after the bytes of completed sends, saying the ranks left;
// BreakCommunicator and the engine's own breaks say this engine broke it. A peer whose
// sessions were up and whose ranks left (BYE) while the communicator was not ready here yet
// (another peer's sessions were not up) departs as above, and it gets ready without them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hw/device.h"
#include "hw/emu/communicator.h"
#include "hw/emu/dmp.h"
#include "hw/emu/rbm.h"
#include "hw/poe/engine.h"

namespace cclo::hw::emu {

/// Defaults for the engine's own tests; cclod sets every field from its config, whose
/// defaults differ (daemon/config.h: 256 KiB eager messages, a 256 MiB pool).
struct EmuConfig {
  std::string listen_host = "127.0.0.1";  ///< address of the data port (a name resolves once)
  uint16_t data_port = 0;                 ///< 0 picks an ephemeral port
  uint64_t rx_pool_bytes = 64ull << 20;   ///< eager rx buffer pool
  uint64_t segment_bytes = 1ull << 20;    ///< segment size: pipelining unit of rendezvous
  /// Largest message sent (and accepted) eagerly, at most segment_bytes; 0: never eager.
  /// The rx pool is cut into buffers of this size (at least 4 KiB).
  uint64_t eager_max_bytes = 64ull << 10;
  /// Rx pool buffers reserved for each peer link (as far as the pool goes): how many
  /// eager messages that peer may have unapplied here. A communicator's local ranks may
  /// have as many staged for each other (in buffers no link reserved).
  uint32_t credits_per_peer = 8;
  /// Rendezvous requests each peer link may have waiting here for their receives; one
  /// more is invalid data (its communicator breaks).
  uint64_t rendezvous_waiting_per_peer = 65536;
  /// Per data session handshake; also how long a peer whose end of the session this
  /// engine sends on is gone may keep its own open.
  absl::Duration handshake_timeout = absl::Seconds(10);
  /// A data session on which nothing came for this long, or for the peer's if shorter
  /// (heartbeats included), is lost: its peer daemon's ranks depart
  /// (poe::tcp::TcpEngineConfig::peer_timeout).
  absl::Duration peer_timeout = absl::Seconds(10);
  /// The network's link rate: data sessions size their send buffer to its product with
  /// their round trip where the kernel's autotuning falls short. 0: always left to it.
  uint64_t link_bytes_per_second = 0;
  /// TCP congestion control of the data sessions; empty: the host's.
  std::string tcp_congestion;
  /// Scratch memory the calls running on the engine may hold in all; a call whose
  /// scratch would take it past this fails RESOURCE_EXHAUSTED before it moves anything.
  uint64_t scratch_max_bytes = ScratchPool::kDefaultLimitBytes;
};

/// Creates the device and binds its data port: UNAVAILABLE if the port is taken,
/// INVALID_ARGUMENT for a bad config (segment_bytes a multiple of 8 in [4 KiB, 16 MiB],
/// rx_pool_bytes at least one segment, eager_max_bytes at most segment_bytes,
/// credits_per_peer at most poe::kMaxCredits, rendezvous_waiting_per_peer at least 1,
/// handshake_timeout positive, peer_timeout in [1s, 24h], a tcp_congestion the kernel
/// takes).
absl::StatusOr<DevicePtr> CreateEmuDevice(const EmuConfig& config);

/// The engine's unit of scheduled work and the scheduler's quantum: 256 KiB, or a segment
/// if smaller (at most kSharedTurnBytes while tenants share the engine). Memory moves run
/// in pieces of this size and each engine turn serves about this much, so another
/// tenant's op waits behind little work however large the segments.
inline uint64_t UnitBytes(const EmuConfig& config) {
  return std::min<uint64_t>(config.segment_bytes, 256 << 10);
}

/// While tenants share the engine (fair scheduling, two or more tenants with engine work
/// within the last 50 ms each), units and each data session's bytes per turn are at most
/// this: another tenant's op waits behind little work, at some cost in bandwidth to those
/// that stream (DeviceStats::turn_bytes; full turns are poe::kTurnBytes).
constexpr uint64_t kSharedTurnBytes = 64 << 10;

class EmuDevice final : public Device, public poe::EngineHandler {
 public:
  explicit EmuDevice(const EmuConfig& config);
  /// Fails pending calls and configurations with UNAVAILABLE "engine shutting down",
  /// ends every session with BYE "peer daemon <DataAddress()> shutting down", and joins
  /// the engine thread.
  ~EmuDevice() override;

  /// Binds the data port and starts the engine thread. Call once, before anything else.
  absl::Status Start();

  // Device
  std::string DataAddress() const override;
  absl::Status PrepareCommunicator(const CommId& id, const CommSecret& secret) override;
  void ConfigureCommunicator(const CommunicatorConfig& config, SteadyTime deadline,
                             StatusFn done) override;
  void RemoveCommunicator(const CommId& id, absl::Status reason) override;
  void BreakCommunicator(const CommId& id, absl::Status reason) override;
  void DepartLocalRank(const CommId& id, uint32_t rank, absl::Status reason) override;
  void Call(const CallDescriptor& call, CallBuffers buffers, SteadyTime deadline,
            CompletionFn done) override;
  void Withdraw(const CallDescriptor& call, absl::Status why) override;
  void SetEventHandler(EventFn events) override;
  void SetScheduling(const Scheduling& scheduling) override;
  DeviceStats Stats() const override;
  void AddPoller(Poller* poller) override;

  // poe::EngineHandler (engine thread)
  absl::StatusOr<CommSecret> Secret(const CommId& comm) override;
  void OnAuthenticated(poe::Session& session) override;
  void OnSessionUp(poe::Session& session) override;
  void OnSessionClosed(poe::Session& session, const absl::Status& reason) override;
  absl::Status OnDeparture(poe::Session& session, uint32_t rank,
                           const std::string& reason) override;
  absl::StatusOr<std::byte*> OnSegment(poe::Session& session,
                                       const poe::SegmentHeader& header) override;
  absl::Status OnPayload(poe::Session& session, const poe::SegmentHeader& header) override;
  absl::Status OnPayloadPart(poe::Session& session, const poe::SegmentHeader& header,
                             uint64_t landed) override;
  SteadyTime OnTimer(SteadyTime now) override;

 private:
  /// Shortens the engine's turns and units while tenants share it, restores them after.
  void SizeTurns(SteadyTime now);
  /// The DMP's unit now: UnitBytes, at most kSharedTurnBytes while tenants share.
  uint64_t CurrentUnitBytes() const;
  void Configure(const CommunicatorConfig& config, SteadyTime deadline, StatusFn done);
  /// RemoveCommunicator and BreakCommunicator: drops the preparation at once, then Remove
  /// on the engine thread.
  void PostRemove(const CommId& id, absl::Status reason, poe::ByeKind bye);
  /// Ends the communicator, its sessions' BYE saying `bye`, and forgets it.
  void Remove(const CommId& id, absl::Status reason, poe::ByeKind bye);
  /// Hands the call to the DMP, or fails it; a `withdrawn` one (not OK) has no buffers and
  /// only takes its place (Withdraw).
  void RunCall(const CallDescriptor& call, CallBuffers buffers, SteadyTime deadline,
               CompletionFn done, absl::Status withdrawn = absl::OkStatus());
  absl::Status CheckCall(const CallDescriptor& call, Communicator** comm) const;
  void Shutdown();

  Communicator* Find(const CommId& id) const;
  /// The link of `session` in its communicator, or nullptr if it is not linked.
  PeerLink* LinkOf(poe::Session& session, Communicator** comm) const;
  /// Links an authenticated incoming session to its peer in `comm` as its rx and admits it.
  void AdoptIncoming(Communicator& comm, poe::Session& session);
  /// Once both sessions of `link` are up: opens its credit account, grants the peer its
  /// credits and learns its segment and eager limits.
  void MaybeLinkUp(Communicator& comm, PeerLink& link);
  /// The sessions of `link` are gone (lost unless its peer left): releases its credits both
  /// ways.
  void LinkDown(PeerLink& link);
  /// Moves `link` to `state` in the link counters.
  void SetLinkState(PeerLink& link, LinkState state);
  void MaybeReady(Communicator& comm);
  /// Marks `comm` broken with `status` (what its pending and later calls fail with; the
  /// call `expired` gets `expired_status`), closes its sessions and fails its calls.
  /// The sessions' BYE says `bye`: this engine broke it, unless its ranks left (Remove).
  void Break(Communicator& comm, const absl::Status& status,
             poe::ByeKind bye = poe::ByeKind::kBroke, uint64_t expired = 0,
             const absl::Status& expired_status = absl::OkStatus());
  /// Break without its log line (Remove says why a communicator ends).
  void End(Communicator& comm, const absl::Status& status, poe::ByeKind bye, uint64_t expired = 0,
           const absl::Status& expired_status = absl::OkStatus());
  /// `ranks` departed with `reason`: those of a peer whose sessions ended (not for invalid
  /// data), or one of this engine's that left (DepartLocalRank).
  void Depart(Communicator& comm, const std::vector<uint32_t>& ranks, const absl::Status& reason);
  /// Closes the sessions of `comm` with BYE `reason` and `bye`; their ranks are not marked
  /// departed.
  void CloseSessions(Communicator& comm, const absl::Status& reason, poe::ByeKind bye);
  /// A call failed mid-way (its program's data did not fit): breaks the communicator.
  void BreakMidCall(Communicator& comm, const absl::Status& reason);
  /// Invalid data from the peer engine at `address`: counts it and breaks the communicator.
  void Reject(Communicator& comm, const std::string& address, const absl::Status& problem);
  /// Checks that `header` travels between a rank the peer at `address` hosts and one this
  /// engine hosts, in the direction its type goes.
  absl::Status CheckRoute(const Communicator& comm, const std::string& address,
                          const poe::SegmentHeader& header) const;
  /// The RBM's clear_to_send hook: tells the sender of `key` to send its data.
  void SendClearToSend(const MessageKey& key, uint64_t total);
  /// Sends the credits freed this turn back to their peers.
  void ReturnCredits();
  void ForgetSession(poe::Session& session);
  /// Closes the rx of links whose peer ended tx but did not end rx by the deadline.
  void ExpireHalfClosed(SteadyTime now);
  /// Tells the peers of each departing rank whose own calls are done (DEPART), and forgets
  /// those of communicators that broke or went.
  void TellDepartures();
  /// "<address> (rank N)" or "<address> (ranks N, M)": the peer engine and the ranks of
  /// `comm` it hosts (what reaches a rank's op names its communicator elsewhere).
  std::string DescribePeer(const Communicator& comm, const std::string& address) const;

  const EmuConfig config_;
  poe::EnginePtr engine_;  ///< set by Start; its thread runs everything below
  std::string address_;
  Counters counters_;

  std::mutex prepared_mu_;  ///< std::mutex so that ThreadSanitizer sees it
  /// Secrets of communicators prepared but not yet configured.
  absl::flat_hash_map<CommId, CommSecret> prepared_ ABSL_GUARDED_BY(prepared_mu_);

  // Engine thread only.
  EventFn events_ = [](const CommunicatorEvent&) {};
  Rbm rbm_;
  Dmp dmp_;
  uint64_t next_call_id_ = 1;
  bool shutting_down_ = false;
  absl::flat_hash_map<CommId, std::unique_ptr<Communicator>> comms_;
  /// Authenticated incoming sessions of prepared communicators, admitted at configure; the
  /// engine refuses one still here at its handshake deadline (reported as closed).
  absl::flat_hash_map<CommId, std::vector<poe::Session*>> parked_;
  /// Open RBM credit accounts: the communicator and link they serve (up while open).
  absl::flat_hash_map<uint64_t, std::pair<CommId, PeerLink*>> accounts_;
  std::set<std::pair<SteadyTime, CommId>> configure_deadlines_;
  /// Links whose tx ended while rx stays open, by rx_end_deadline: communicator and peer
  /// address (stale once rx ended).
  std::set<std::tuple<SteadyTime, CommId, std::string>> half_closed_;
  /// Ranks of this engine that departed (DepartLocalRank) and whose peers are not told yet:
  /// they are once the rank's own calls are done, so that nothing comes from it after.
  std::set<std::pair<CommId, uint32_t>> departing_;
  /// Tenants that had engine work lately, and until when each counts as active.
  absl::flat_hash_map<uint32_t, SteadyTime> active_until_;
  bool shared_turns_ = false;  ///< turns and units are at most kSharedTurnBytes
};

}  // namespace cclo::hw::emu
