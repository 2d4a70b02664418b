// The boundary between the daemon and the collective offload engine (CCLO).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "hw/call.h"
#include "hw/clock.h"
#include "hw/poller.h"
#include "hw/types.h"

namespace cclo::hw {

/// One rank of a communicator as the device sees it: which daemon hosts it.
struct RankEntry {
  std::string data_address;  ///< "host:port" of the hosting daemon's data port
};

/// A communicator's entry in the device's configuration memory.
struct CommunicatorConfig {
  CommId id{};
  CommSecret secret{};
  std::vector<RankEntry> ranks;  ///< indexed by rank; local ranks carry our data address
};

/// What a finished call reports.
struct Completion {
  absl::Status status;
  std::string algorithm;    ///< the algorithm that ran
  uint64_t bytes_sent = 0;  ///< bytes this rank put on the network or copied to a local rank
};

/// One tenant's use of the engine's scratch memory.
struct TenantScratch {
  uint64_t used_bytes = 0;  ///< held by its running calls
  uint64_t refusals = 0;    ///< calls refused because it would have held more than its limit
};

/// Engine-wide counters, for telemetry and `ccloctl status`.
struct DeviceStats {
  uint64_t calls_completed = 0;
  uint64_t calls_failed = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t rx_pool_bytes_total = 0;
  uint64_t rx_pool_bytes_used = 0;      ///< holding messages that arrived before their receive
  uint64_t rx_pool_bytes_peak = 0;      ///< the most used at once: the pool's memory taken
  uint64_t rx_pool_bytes_reserved = 0;  ///< reserved for peers' eager credits
  uint64_t sessions_up = 0;             ///< data sessions up, one per communicator and peer engine
  /// Data sessions of the configured communicators that are not up: not yet, their peer
  /// engine left the communicator (said goodbye), or lost (a failure, or the communicator
  /// broke).
  uint64_t sessions_connecting = 0;
  uint64_t sessions_left = 0;
  uint64_t sessions_lost = 0;
  /// Peer engines whose data sessions the peer's side ended without a goodbye (reset,
  /// heartbeat missed, invalid data) since the device started, whether or not their
  /// communicators still exist (a broken communicator's sessions stop counting above).
  uint64_t sessions_lost_total = 0;
  uint64_t wire_errors = 0;          ///< invalid segments or handshakes rejected
  uint64_t accept_pauses = 0;        ///< times the data port paused accepting (Engine)
  uint64_t eager_messages = 0;       ///< messages sent eagerly (no receive needed first)
  uint64_t rendezvous_messages = 0;  ///< messages sent once their receive was posted
  /// Of those, small enough for eager but short of credit (to a rank on this engine: of a
  /// free rx buffer, or the communicator had credits_per_peer local messages staged).
  uint64_t eager_fallbacks = 0;
  /// Scratch memory the running calls may hold in all and hold now, kept
  /// from finished calls for the next ones, and the scratch buffers allocated because none
  /// kept fitted.
  uint64_t scratch_bytes_limit = 0;
  uint64_t scratch_bytes_used = 0;
  uint64_t scratch_bytes_kept = 0;
  uint64_t scratch_allocations = 0;
  /// Tenant index -> scratch its running calls hold, and its calls refused for their
  /// tenant's scratch limit (Scheduling::scratch_bytes) since the start; tenants whose
  /// calls never took scratch are absent.
  std::map<uint32_t, TenantScratch> tenant_scratch;
  /// Payload bytes each data session reads and writes per engine turn now: less while
  /// tenants share the engine.
  uint64_t turn_bytes = 0;
};

/// How the engine shares itself between tenants (CallDescriptor::tenant).
struct Scheduling {
  /// true: work-conserving weighted deficit round robin over tenants, segment by segment;
  /// false: first come, first served.
  bool fair = true;
  /// Tenant index -> weight, its share relative to the others' while they all have work;
  /// tenants not listed (and weights of 0) count as 1.
  std::map<uint32_t, uint32_t> weights;
  /// Tenant index -> scratch memory its running calls may hold at most, within the
  /// engine's own limit; tenants not listed have only the engine's limit.
  std::map<uint32_t, uint64_t> scratch_bytes;
};

/// What the engine learned about a communicator on its own, not as the end of a call.
struct CommunicatorEvent {
  CommId comm{};
  /// Ranks on another engine that left, or were lost with it, for `reason` (or a rank here
  /// that left, DepartLocalRank). Empty: the engine broke the communicator for `reason`,
  /// and no call of it can run any more.
  std::vector<uint32_t> departed;
  absl::Status reason;
};

using CompletionFn = std::function<void(Completion)>;
using EventFn = std::function<void(const CommunicatorEvent&)>;
using StatusFn = std::function<void(absl::Status)>;

/// A collective offload engine. Thread-safe: every method may be called from any thread;
/// callbacks run on the engine's own thread and must not block.
class Device {
 public:
  virtual ~Device() = default;

  /// "host:port" where this engine accepts data sessions from peer engines.
  virtual std::string DataAddress() const = 0;

  /// Makes the communicator's secret known so that peers' data sessions for it can be
  /// authenticated before its rank table is installed. Idempotent.
  virtual absl::Status PrepareCommunicator(const CommId& id, const CommSecret& secret) = 0;

  /// Installs the rank table and opens (or accepts) one authenticated data session to
  /// every other engine in it. `done` runs once: OK when all sessions are up (or were, and
  /// their peer engine's ranks left), or an error when `deadline` passes or a peer refuses.
  virtual void ConfigureCommunicator(const CommunicatorConfig& config, SteadyTime deadline,
                                     StatusFn done) = 0;

  /// Fails the communicator's pending calls with `reason` (UNAVAILABLE unless given),
  /// closes its sessions and forgets it.
  virtual void RemoveCommunicator(const CommId& id, absl::Status reason) = 0;

  /// RemoveCommunicator for a communicator this daemon breaks, where its ranks did not
  /// leave it: the peer engines hear that this one broke it.
  virtual void BreakCommunicator(const CommId& id, absl::Status reason) = 0;

  /// Rank `rank`, hosted here, left the communicator while others hosted here stay: as
  /// for the ranks of a peer engine that departed, the pending and later calls that need
  /// it to send or receive anything more fail with `reason`, and the rest go on; the peer
  /// engines hear it, with `reason`, once the rank's own calls are done, which are not
  /// touched. A rank that already left stays as it left.
  virtual void DepartLocalRank(const CommId& id, uint32_t rank, absl::Status reason) = 0;

  /// Runs one call. Calls of one (communicator, rank) start in submission order; a
  /// collective runs alone, consecutive sends and receives side by side. `done`
  /// runs exactly once, also on failure (a lost peer is UNAVAILABLE naming the peer; an
  /// expired deadline is DEADLINE_EXCEEDED and breaks the communicator).
  virtual void Call(const CallDescriptor& call, CallBuffers buffers, SteadyTime deadline,
                    CompletionFn done) = 0;

  /// A call that was submitted but withdrawn before it reached Call (cancelled, or its
  /// dependency failed), with `why`. A collective still takes its place in the order of
  /// its (communicator, rank), so the collectives after it meet the other ranks' ones they
  /// are meant to, not the other ranks' part of this one: what those send to it is
  /// received into nothing, and their receives from it get nothing (until their
  /// deadline). A send or receive withdrawn is as if it never was (as MPI_Cancel leaves it:
  /// it matches nothing). Nothing is reported. It has no deadline of its own: it ends as
  /// soon as the calls before it did, which have theirs.
  virtual void Withdraw(const CallDescriptor& call, absl::Status why) = 0;

  /// Replaces how the engine shares itself between tenants; applies to work already
  /// queued from the engine's next turn on.
  virtual void SetScheduling(const Scheduling& scheduling) = 0;

  /// From the engine's next turn on, `events` hears when ranks depart and when the engine
  /// breaks a communicator (after failing its calls).
  virtual void SetEventHandler(EventFn events) = 0;

  /// A snapshot of the engine's counters.
  virtual DeviceStats Stats() const = 0;

  /// Runs `poller` on the engine's thread from its next turn on, so that work it starts
  /// (calls) needs no hand-off between threads. `poller` must outlive the device.
  virtual void AddPoller(Poller* poller) = 0;
};

using DevicePtr = std::unique_ptr<Device>;

}  // namespace cclo::hw
