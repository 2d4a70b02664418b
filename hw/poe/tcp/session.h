// TcpSession: one data session over a nonblocking TCP socket (TCP_NODELAY), driven by the
// TcpEngine's epoll loop.
//
// Receive side: a small state machine reads ahead up to kStageBytes at a time and takes
// from those a 64-byte header, then the payload, into the memory the handler names (the
// destination buffer, a scratch segment or an rx pool buffer): a small segment costs one
// read with its header, and what a payload has beyond the read-ahead is read straight into
// its memory. Control payloads go to a bounded buffer and run the handshake. Reading
// never stops: the handler's credits and rendezvous make sure it always has room, so a
// peer's hang-up is seen only after everything it sent before.
// Send side: a FIFO of segments, each written with one sendmsg of (header, payload) iovecs
// gathered across several queued segments; the payload is never copied.
// Liveness: both ends announce their peer timeout in the handshake, and the session's is
// the smaller (the session ends when the less patient end gives up, so the other may as
// well). The engine gives every up session a heartbeat tick every kHeartbeatTicks-th of
// its timeout, at most every kMaxHeartbeatPeriod, on the monotonic clock (PlanHeartbeats).
// At a tick, a session with nothing queued sends a HEARTBEAT (one with something queued
// is sending it); one that read nothing for a timeout's worth of ticks in a row is lost.
// So a peer that stops (hangs, or its host or the network goes without a reset) is found
// within the timeout plus one tick, and a live one is heard at least every tick: one that
// hangs for less than the timeout less a tick is not lost. Ticks are counted, not timed:
// an engine that did not run for a while reads what came meanwhile before its next tick.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "hw/poe/handshake.h"
#include "hw/poe/session.h"
#include "hw/poe/wire.h"
#include "hw/types.h"

namespace cclo::hw::poe::tcp {

class TcpEngine;

class TcpSession final : public Session {
 public:
  /// Heartbeat ticks per peer timeout, for timeouts up to 5 × kMaxHeartbeatPeriod.
  static constexpr int kHeartbeatTicks = 5;
  /// Longest time between two ticks, whatever the timeout: an idle session sends something
  /// at least this often, so NAT and firewall state along the path stays.
  static constexpr absl::Duration kMaxHeartbeatPeriod = absl::Seconds(10);
  /// How a session with peer timeout `timeout` ticks: every `period`; lost after `ticks`
  /// ticks in a row that found nothing read (period × ticks covers the timeout).
  struct HeartbeatPlan {
    absl::Duration period;
    int64_t ticks = 0;
  };
  static HeartbeatPlan PlanHeartbeats(absl::Duration timeout);

  /// An accepted socket; the peer's HELLO names the communicator.
  TcpSession(TcpEngine& engine, uint64_t id, int fd);
  /// An outgoing socket whose nonblocking connect is under way.
  TcpSession(TcpEngine& engine, uint64_t id, int fd, const CommId& comm, const CommSecret& secret,
             const std::string& peer_address);
  ~TcpSession() override;

  // Session
  const CommId& comm() const override { return comm_; }
  const std::string& peer_address() const override { return peer_address_; }
  uint64_t segment_bytes() const override { return segment_bytes_; }
  uint64_t eager_bytes() const override { return peer_eager_bytes_; }
  void Admit() override;
  void Send(const SegmentHeader& header, const std::byte* payload,
            std::function<void()> on_written) override;
  void Depart(uint32_t rank, const absl::Status& reason) override;
  void Close(const absl::Status& reason, ByeKind kind) override;

  // For the engine.
  uint64_t id() const { return id_; }
  int fd() const { return fd_; }
  /// Handles epoll readiness. The socket starts registered for reading (accepted) or
  /// writing (connecting).
  void OnEvents(uint32_t events);
  /// Writes as much of the send queue as the socket takes.
  void Flush();
  /// The handshake deadline passed before both sides were authenticated, or before the
  /// handler admitted the authenticated session (its communicator was not configured).
  void ExpireHandshake();
  /// Closes an accepted session still in its handshake to make room for a newer one (a wire
  /// error): without a word to the peer or the handler (which never heard of it), or, when
  /// it was authenticated and waits to be admitted, refused to both with the reason.
  void Evict();
  /// Authenticated and admitted: data may flow.
  bool up() const { return state_ == State::kUp; }
  /// Time between two heartbeat ticks (PlanHeartbeats of the session's peer timeout).
  absl::Duration heartbeat_period() const { return PlanHeartbeats(timeout_).period; }
  /// A heartbeat tick of an up session: sends a HEARTBEAT if it wrote nothing since the
  /// last tick; true when it read nothing for its plan's ticks (call Lose()).
  bool Heartbeat();
  /// Closes the session as lost (UNAVAILABLE), telling the peer why (BYE).
  void Lose();

 private:
  enum class State {
    kConnecting,
    kAwaitHello,
    kAwaitChallenge,
    kAwaitResponse,
    kParked,
    kAwaitAccept,
    kUp,
    kClosed
  };
  enum class Rx { kHeader, kControl, kPayload };

  struct TxEntry {
    EncodedHeader header;
    const std::byte* payload = nullptr;
    uint32_t length = 0;
    std::vector<std::byte> owned;  ///< control payloads live here
    size_t written = 0;            ///< bytes of header + payload already written
    std::function<void()> on_written;
  };

  /// Read ahead per read of a header: a segment with up to this much (less its header) of
  /// payload needs no other read.
  static constexpr size_t kStageBytes = 4096;

  void OnConnected();
  void OnReadable();
  /// Moves read-ahead bytes into the current header, control or payload (counting payload
  /// bytes in `payload_read`) and handles it when whole; true when that ended a data
  /// payload.
  bool TakeStaged(uint64_t& payload_read);
  void OnHeader();
  void Offer();
  /// Leaving a payload partly read: tells the handler how much of it is in place.
  void OnPayloadPart();
  void OnPayloadDone();
  void OnControl();
  void OnHello(const ControlMessage& hello);
  void OnChallenge(const ControlMessage& challenge);
  void OnResponse(const ControlMessage& response);
  void SendControl(const ControlMessage& message);
  /// Refuses the handshake: counts a wire error, tells the peer (in a control segment of
  /// `version`, the peer's), closes.
  void Refuse(const absl::Status& reason, uint8_t version = kWireVersion);
  /// The handshake is done: data may flow, and the socket's buffers suit the path.
  void BecomeUp();
  /// Ends the session on our side's initiative and reports it to the handler.
  void Fail(const absl::Status& reason);
  /// Best effort: writes one last control message (of wire `version`) without waiting.
  void SendFinal(const ControlMessage& message, uint8_t version = kWireVersion);
  /// Writes the rest of a segment left partly written, as far as the socket takes it now,
  /// so that a final control message is not cut into it.
  void FinishPartialEntry();
  /// Reads and drops what the peer sent and we did not read, so that closing the socket
  /// sends FIN after our queued bytes: a close with unread input sends a reset instead,
  /// which discards what the kernel has not yet delivered.
  void DiscardInput();
  /// After a failed write: reads and applies what the peer sent before it went away (its
  /// goodbye included, which then closes the session with its reason).
  void DrainInput();
  void CloseSocket();
  void SetEvents(bool read, bool write);
  /// Checks the sizes and the timeout a peer announced in its HELLO or CHALLENGE.
  absl::Status CheckAnnounced(const ControlMessage& announced) const;
  /// The engine's peer timeout in whole milliseconds, as the handshake announces it.
  uint64_t TimeoutMs() const;
  std::string Name() const;

  TcpEngine& engine_;
  const uint64_t id_;
  int fd_;
  const HandshakeRole role_;
  State state_;
  CommId comm_{};
  CommSecret secret_{};
  std::string peer_address_;
  uint64_t segment_bytes_ = 0;
  uint64_t peer_eager_bytes_ = 0;
  /// The session's peer timeout: the smaller of the two ends' (set in the handshake).
  absl::Duration timeout_ = absl::InfiniteDuration();
  ControlMessage hello_;      ///< the HELLO sent (connector) or received (acceptor)
  ControlMessage challenge_;  ///< the CHALLENGE sent or received, without its proof

  Rx rx_ = Rx::kHeader;
  EncodedHeader header_bytes_{};
  SegmentHeader current_;
  std::vector<std::byte> control_;
  std::byte* landing_ = nullptr;
  uint64_t have_ = 0;  ///< bytes of the current header or payload read so far
  std::array<std::byte, kStageBytes> stage_;  ///< read ahead, not yet taken
  size_t staged_begin_ = 0;
  size_t staged_end_ = 0;

  std::deque<TxEntry> tx_;
  bool reading_ = false;
  bool draining_ = false;  ///< in DrainInput: a write failing meanwhile waits for it
  bool writing_ = false;
  bool heard_ = false;        ///< read something since the last heartbeat tick
  int64_t silent_ticks_ = 0;  ///< heartbeat ticks in a row that found nothing read
};

}  // namespace cclo::hw::poe::tcp
