// A data session: one authenticated, ordered stream of segments between this engine and
// one peer engine, for one communicator. Transport-neutral; tcp/ implements it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "hw/poe/handshake.h"
#include "hw/poe/wire.h"
#include "hw/types.h"

namespace cclo::hw::poe {

/// Owned by its Engine; valid until the engine reports it closed (OnSessionClosed) or the
/// handler closes it. Every method runs on the engine thread.
class Session {
 public:
  virtual ~Session() = default;

  /// The communicator this session carries.
  virtual const CommId& comm() const = 0;

  /// The peer engine's data address ("host:port").
  virtual const std::string& peer_address() const = 0;

  /// Largest payload per segment that both ends accept; valid once authenticated.
  virtual uint64_t segment_bytes() const = 0;

  /// Largest eager message the peer accepts (the size of its eager credits), 0 when it
  /// takes none; valid once authenticated.
  virtual uint64_t eager_bytes() const = 0;

  /// Acceptor side: admits a session the handler was told about in OnAuthenticated. The
  /// session is up when this returns (no OnSessionUp follows).
  virtual void Admit() = 0;

  /// Queues one data segment. `payload` (header.length bytes) is written straight from
  /// where it lies and must stay valid until `on_written` runs, which happens on a later
  /// turn of the event loop, never inside Send.
  virtual void Send(const SegmentHeader& header, const std::byte* payload,
                    std::function<void()> on_written) = 0;

  /// Queues a DEPART: rank `rank` of this engine left for `reason`, and nothing more comes
  /// from it (its segments queued before go first).
  virtual void Depart(uint32_t rank, const absl::Status& reason) = 0;

  /// Closes the session, telling the peer `reason` and `kind` (BYE) when the stream allows
  /// it: after every segment whose on_written has run, so the peer gets those first. Queued
  /// segments are dropped without their on_written; the handler hears nothing more.
  virtual void Close(const absl::Status& reason, ByeKind kind) = 0;
};

}  // namespace cclo::hw::poe
