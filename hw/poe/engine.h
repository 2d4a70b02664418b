// A protocol offload engine (POE): the event loop that owns the data sessions of one
// device. Transport-neutral; tcp/ implements it (rdma/ later, with the same shape).
//
// One thread runs the loop and does all I/O. The device plugs in as the EngineHandler:
// every handler call, posted task and on_written callback runs on that thread, so the
// device's state needs no locks beyond the posting queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hw/clock.h"
#include "hw/poe/session.h"
#include "hw/poe/wire.h"
#include "hw/poller.h"
#include "hw/types.h"

namespace cclo::hw::poe {

/// Payload bytes a session reads, and bytes it writes, per turn of the loop, unless the
/// handler sets less (Engine::SetTurnBytes). A session streaming large segments holds
/// the engine thread for about this much copying; then every other session, the command
/// rings and the scheduled work get their turn (a large segment takes several turns).
/// Writes this large are what TCP needs for its full rate: on loopback here, 256 KiB
/// writes move about half of what 1 MiB writes do (bench/tcp-writes, docs/performance-log.md).
constexpr uint64_t kTurnBytes = 1 << 20;

/// The engine's user. Every method runs on the engine thread and must not block.
class EngineHandler {
 public:
  virtual ~EngineHandler() = default;

  /// The secret of a communicator this device knows (prepared or configured), for the
  /// handshake of an incoming session; NOT_FOUND refuses the session.
  virtual absl::StatusOr<CommSecret> Secret(const CommId& comm) = 0;

  /// An incoming session proved the secret. Call session.Admit() now or later, or
  /// session.Close().
  virtual void OnAuthenticated(Session& session) = 0;

  /// An outgoing session (from Engine::Connect) was admitted by the peer: it is up.
  virtual void OnSessionUp(Session& session) = 0;

  /// The session ended; it is destroyed after this returns. Everything the peer sent
  /// before the end has been offered (OnSegment/OnPayload) first. `reason` says how it
  /// ended: CANCELLED with the peer's own words when the peer said BYE as its ranks left,
  /// ABORTED with them when it said BYE as it broke the communicator; UNAVAILABLE when
  /// the connection was lost (end of stream without BYE, reset, I/O error);
  /// INVALID_ARGUMENT for bytes that break the protocol; PERMISSION_DENIED when the peer
  /// refused the handshake; other codes for a handshake this side refused or timed out.
  virtual void OnSessionClosed(Session& session, const absl::Status& reason) = 0;

  /// The peer said DEPART on an up session: its rank `rank` left for `reason` (its words).
  /// An error closes the session with it.
  virtual absl::Status OnDeparture(Session& session, uint32_t rank, const std::string& reason) {
    return absl::OkStatus();
  }

  /// A data segment's header arrived. Return where its payload goes (header.length bytes;
  /// ignored when it has none), or an error to close the session with it. The engine
  /// never stops reading: the handler must always have room (flow control is its own).
  virtual absl::StatusOr<std::byte*> OnSegment(Session& session, const SegmentHeader& header) = 0;

  /// The payload of the segment last accepted by OnSegment is in place (at once for a
  /// segment without payload). An error closes the session with it. A session reads at
  /// most one payload from its socket per turn of the loop (OnTimer runs between two of
  /// them); the segments that came whole in one read-ahead of a few KiB may all be offered
  /// in one turn.
  virtual absl::Status OnPayload(Session& session, const SegmentHeader& header) = 0;

  /// The first `landed` bytes of that payload are in place and the rest comes in later
  /// turns: the handler may start on them. An error closes the session with it.
  virtual absl::Status OnPayloadPart(Session& session, const SegmentHeader& header,
                                     uint64_t landed) {
    return absl::OkStatus();
  }

  /// Called after every turn of the loop: expire what is due at `now` and return the
  /// next time to be called (SteadyTime::InfiniteFuture() for none). The loop sleeps until then
  /// unless I/O or a posted task wakes it: a handler whose next time comes earlier outside
  /// OnTimer posts a task (an empty one will do), and a turn that ran tasks always ends
  /// here before the loop sleeps.
  virtual SteadyTime OnTimer(SteadyTime now) = 0;
};

class Engine {
 public:
  /// Stops the loop if still running; closes every socket without handler calls.
  virtual ~Engine() = default;

  /// "host:port" where peers reach this engine, host numeric ("[v6]:port" for IPv6).
  virtual const std::string& address() const = 0;

  /// Starts the event loop thread (UNAVAILABLE if no thread can be had). Call once.
  virtual absl::Status Start() = 0;

  /// Thread-safe: runs `task` on the engine thread, in posting order.
  virtual void Post(std::function<void()> task) = 0;

  /// Thread-safe: polls `poller` on every turn of the loop from its next one on (see
  /// hw::Poller); `poller` must outlive the engine's thread.
  virtual void AddPoller(Poller* poller) = 0;

  /// Thread-safe, not from the engine thread: runs the tasks posted so far, then stops
  /// the loop and joins its thread. Nothing for an engine whose Start failed or never ran.
  virtual void Stop() = 0;

  /// Engine thread: opens an outgoing session for `comm` to the engine at `peer_address`
  /// and authenticates it with `secret`. The handler hears OnSessionUp or
  /// OnSessionClosed. Fails at once only if the address cannot be used (it must be numeric,
  /// as address() is: the engine thread never waits for a name server; or, TCP, the kernel
  /// no longer allows the engine's congestion control).
  virtual absl::StatusOr<Session*> Connect(const CommId& comm, const CommSecret& secret,
                                           const std::string& peer_address) = 0;

  /// Segments and handshakes this engine rejected (bad headers, failed proofs, timeouts).
  virtual uint64_t wire_errors() const = 0;

  /// Times accepting data sessions paused for kAcceptBackoff after an accept failed
  /// (PausesAccepting: out of descriptors or memory, say).
  virtual uint64_t accept_pauses() const = 0;

  /// Engine thread: payload bytes each session reads, and bytes it writes, per turn of
  /// the loop from now on (> 0; kTurnBytes until set). A turn also takes whatever payload
  /// came with a header in its read-ahead (up to 4 KiB), even past a smaller setting.
  virtual void SetTurnBytes(uint64_t bytes) = 0;
};

using EnginePtr = std::unique_ptr<Engine>;

}  // namespace cclo::hw::poe
