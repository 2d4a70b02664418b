#include "hw/poe/tcp/session.h"

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hw/poe/tcp/engine.h"
#include "hw/types.h"
#include "spdlog/spdlog.h"

namespace cclo::hw::poe::tcp {
namespace {

/// Reads per readiness event before yielding to others. A data payload read from the
/// socket also ends the event: at most one such payload, and at most the engine's turn
/// bytes of it, per session and loop turn, so every other session and the engine's
/// scheduled work get a turn in between. Segments that came whole in a read-ahead are
/// all handled at once, and at most kStageBytes are read ahead per event (64 headers).
constexpr int kReadTurns = 64;
constexpr int kMaxIov = 64;

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

}  // namespace

TcpSession::TcpSession(TcpEngine& engine, uint64_t id, int fd)
    : engine_(engine),
      id_(id),
      fd_(fd),
      role_(HandshakeRole::kAcceptor),
      state_(State::kAwaitHello),
      peer_address_("unidentified peer"),
      reading_(true) {}

TcpSession::TcpSession(TcpEngine& engine, uint64_t id, int fd, const CommId& comm,
                       const CommSecret& secret, const std::string& peer_address)
    : engine_(engine),
      id_(id),
      fd_(fd),
      role_(HandshakeRole::kConnector),
      state_(State::kConnecting),
      comm_(comm),
      secret_(secret),
      peer_address_(peer_address),
      writing_(true) {}

TcpSession::~TcpSession() {
  if (fd_ >= 0) close(fd_);
}

std::string TcpSession::Name() const {
  // The peer's address may come from its unauthenticated HELLO: escaped for the logs.
  return absl::StrCat("data session with ", EscapeControl(peer_address_), " for communicator ",
                      CommIdHex(comm_));
}

void TcpSession::Admit() {
  if (state_ != State::kParked) return;
  engine_.HandshakeFinished(id_);
  SendControl({.kind = ControlKind::kAccept});
  BecomeUp();
}

void TcpSession::BecomeUp() {
  state_ = State::kUp;
  engine_.SizeBuffers(fd_, Name());
  engine_.ScheduleHeartbeat(id_, heartbeat_period());
}

uint64_t TcpSession::TimeoutMs() const {
  return static_cast<uint64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(engine_.peer_timeout(), absl::Milliseconds(1))));
}

TcpSession::HeartbeatPlan TcpSession::PlanHeartbeats(absl::Duration timeout) {
  const absl::Duration period = std::min(timeout / kHeartbeatTicks, kMaxHeartbeatPeriod);
  absl::Duration rest;
  const int64_t ticks = absl::IDivDuration(timeout, period, &rest);
  return {period, rest > absl::ZeroDuration() ? ticks + 1 : ticks};
}

bool TcpSession::Heartbeat() {
  silent_ticks_ = std::exchange(heard_, false) ? 0 : silent_ticks_ + 1;
  if (silent_ticks_ >= PlanHeartbeats(timeout_).ticks) return true;
  if (tx_.empty()) SendControl({.kind = ControlKind::kHeartbeat});
  return false;
}

void TcpSession::Lose() {
  if (state_ == State::kClosed) return;
  const absl::Status reason = absl::UnavailableError(
      absl::StrCat("heartbeat missed: nothing came from peer daemon ", EscapeControl(peer_address_),
                   " within the session's peer timeout of ", absl::FormatDuration(timeout_)));
  spdlog::warn("closing {}: {}", Name(), std::string(reason.message()));
  SendFinal({.kind = ControlKind::kBye, .reason = std::string(reason.message())});
  Fail(reason);
}

void TcpSession::Send(const SegmentHeader& header, const std::byte* payload,
                      std::function<void()> on_written) {
  if (state_ == State::kClosed) return;
  tx_.push_back({Encode(header), payload, header.length, {}, 0, std::move(on_written)});
  engine_.WantFlush(id_);
}

void TcpSession::SendControl(const ControlMessage& message) {
  TxEntry entry;
  entry.owned = EncodeControl(message);
  entry.length = static_cast<uint32_t>(entry.owned.size());
  entry.payload = entry.owned.data();
  SegmentHeader header{.type = SegmentType::kControl, .comm = comm_, .length = entry.length};
  header.total = entry.length;
  entry.header = Encode(header);
  tx_.push_back(std::move(entry));
  engine_.WantFlush(id_);
}

void TcpSession::Depart(uint32_t rank, const absl::Status& reason) {
  if (state_ != State::kUp) return;
  SendControl(
      {.kind = ControlKind::kDepart, .reason = std::string(reason.message()), .rank = rank});
}

void TcpSession::Close(const absl::Status& reason, ByeKind kind) {
  if (state_ == State::kClosed) return;
  if (state_ != State::kConnecting) {
    SendFinal({.kind = ControlKind::kBye, .reason = std::string(reason.message()), .bye = kind});
    DiscardInput();
  }
  CloseSocket();
}

void TcpSession::DiscardInput() {
  constexpr int kMaxReads = 256;
  std::byte sink[16384];
  for (int i = 0; i < kMaxReads; ++i) {
    const ssize_t n = recv(fd_, sink, sizeof(sink), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    return;
  }
}

void TcpSession::DrainInput() {
  constexpr int kMaxTurns = 4096;
  draining_ = true;
  for (int turn = 0; turn < kMaxTurns && state_ != State::kClosed; ++turn) {
    pollfd ready{fd_, POLLIN, 0};
    if (poll(&ready, 1, 0) <= 0) break;
    OnReadable();
  }
  draining_ = false;
}

void TcpSession::Fail(const absl::Status& reason) {
  if (state_ == State::kClosed) return;
  CloseSocket();
  engine_.handler().OnSessionClosed(*this, reason);
}

void TcpSession::Refuse(const absl::Status& reason, uint8_t version) {
  engine_.CountWireError();
  spdlog::warn("refusing {}: {}", Name(), std::string(reason.message()));
  SendFinal({.kind = ControlKind::kRefuse, .reason = std::string(reason.message())}, version);
  DiscardInput();  // or the close resets the connection, and the refusal may be lost with it
  Fail(reason);
}

void TcpSession::FinishPartialEntry() {
  if (tx_.empty() || tx_.front().written == 0) return;
  TxEntry& entry = tx_.front();
  while (entry.written < kHeaderBytes + entry.length) {
    iovec iov[2];
    int count = 0;
    if (entry.written < kHeaderBytes) {
      iov[count++] = {entry.header.data() + entry.written, kHeaderBytes - entry.written};
    }
    const size_t done = entry.written > kHeaderBytes ? entry.written - kHeaderBytes : 0;
    if (entry.length > done) {
      iov[count++] = {const_cast<std::byte*>(entry.payload) + done, entry.length - done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the socket is full or broken: the stream stays mid-segment
    entry.written += static_cast<size_t>(n);
  }
  tx_.pop_front();  // written whole; its on_written goes with the session
}

void TcpSession::SendFinal(const ControlMessage& message, uint8_t version) {
  FinishPartialEntry();  // the per-turn write budget may have stopped mid-segment
  if (!tx_.empty() && tx_.front().written > 0) return;  // mid-segment: the stream is busy
  const std::vector<std::byte> payload = EncodeControl(message);
  SegmentHeader header{.type = SegmentType::kControl, .comm = comm_};
  header.length = static_cast<uint32_t>(payload.size());
  header.total = header.length;
  EncodedHeader encoded = Encode(header, version);
  iovec iov[2] = {{encoded.data(), encoded.size()},
                  {const_cast<std::byte*>(payload.data()), payload.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  (void)sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void TcpSession::CloseSocket() {
  state_ = State::kClosed;
  tx_.clear();
  if (fd_ >= 0) {
    close(fd_);  // also drops it from the epoll set
    fd_ = -1;
  }
  engine_.Retire(id_);
}

void TcpSession::SetEvents(bool read, bool write) {
  if (state_ == State::kClosed || (read == reading_ && write == writing_)) return;
  reading_ = read;
  writing_ = write;
  engine_.SetEvents(*this, read, write);
}

void TcpSession::OnEvents(uint32_t events) {
  if (state_ == State::kConnecting) {
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) OnConnected();
    return;
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) OnReadable();
  if (state_ != State::kClosed && (events & EPOLLOUT)) Flush();
}

void TcpSession::OnConnected() {
  int error = 0;
  socklen_t size = sizeof(error);
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
  if (error != 0) {
    Fail(absl::UnavailableError(
        absl::StrCat("cannot connect to peer daemon ", peer_address_, ": ", std::strerror(error))));
    return;
  }
  state_ = State::kAwaitChallenge;
  SetEvents(true, false);
  hello_ = {.kind = ControlKind::kHello,
            .nonce = RandomNonce(),
            .segment_bytes = engine_.segment_bytes(),
            .eager_bytes = engine_.eager_bytes(),
            .timeout_ms = TimeoutMs(),
            .connector = engine_.address(),
            .acceptor = peer_address_};
  SendControl(hello_);
}

void TcpSession::Flush() {
  if (state_ == State::kClosed || state_ == State::kConnecting) return;
  std::vector<std::function<void()>> written;
  const uint64_t turn = engine_.turn_bytes();
  uint64_t sent = 0;
  while (!tx_.empty() && sent < turn) {
    iovec iov[kMaxIov];
    int count = 0;
    uint64_t room = turn - sent;
    auto add = [&](const std::byte* data, size_t bytes) {
      const size_t take = std::min<uint64_t>(bytes, room);
      iov[count++] = {const_cast<std::byte*>(data), take};
      room -= take;
    };
    for (auto it = tx_.begin(); it != tx_.end() && count + 2 <= kMaxIov && room > 0; ++it) {
      if (it->written < kHeaderBytes) {
        add(it->header.data() + it->written, kHeaderBytes - it->written);
      }
      const size_t done = it->written > kHeaderBytes ? it->written - kHeaderBytes : 0;
      if (it->length > done && room > 0) add(it->payload + done, it->length - done);
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      const absl::Status broken = absl::UnavailableError(Errno("write"));
      if (!draining_) {  // else the drain in progress ends the session
        DrainInput();
        Fail(broken);  // unless the peer's goodbye closed it first
      }
      break;
    }
    sent += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    while (left > 0 && !tx_.empty()) {
      TxEntry& entry = tx_.front();
      const size_t step = std::min(left, kHeaderBytes + entry.length - entry.written);
      entry.written += step;
      left -= step;
      if (entry.written == kHeaderBytes + entry.length) {
        if (entry.on_written) written.push_back(std::move(entry.on_written));
        tx_.pop_front();
      }
    }
  }
  SetEvents(reading_, !tx_.empty());
  for (auto& callback : written) callback();
}

void TcpSession::OnReadable() {
  const uint64_t turn_bytes = engine_.turn_bytes();
  uint64_t payload_read = 0;
  uint64_t read_ahead = 0;
  int reads = 0;
  bool drained = false;   // a read came back short: the socket has nothing more just now
  bool finished = false;  // a data payload ended: no more reads this turn
  while (state_ != State::kClosed) {
    if (staged_begin_ < staged_end_) {
      finished |= TakeStaged(payload_read);
      continue;
    }
    // The socket stays readable if it has more: the loop comes back for it next turn.
    if (finished || drained || reads == kReadTurns) break;
    // A payload's rest goes straight to its landing; anything else is read ahead.
    const bool direct = rx_ == Rx::kPayload;
    const uint64_t budget = turn_bytes - std::min(payload_read, turn_bytes);
    const uint64_t want =
        direct ? std::min(current_.length - have_, budget) : stage_.size() - read_ahead;
    if (want == 0) break;
    const ssize_t n = read(fd_, direct ? landing_ + have_ : stage_.data(), want);
    ++reads;
    if (n == 0) return Fail(absl::UnavailableError("connection closed by peer"));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return Fail(absl::UnavailableError(Errno("read")));
    }
    heard_ = true;
    drained = static_cast<uint64_t>(n) < want;
    if (!direct) {
      read_ahead += static_cast<uint64_t>(n);
      staged_begin_ = 0;
      staged_end_ = static_cast<size_t>(n);
      continue;
    }
    have_ += static_cast<uint64_t>(n);
    payload_read += static_cast<uint64_t>(n);
    if (have_ == current_.length) {
      OnPayloadDone();
      finished = true;
    }
  }
  OnPayloadPart();  // leaving mid-payload perhaps
}

bool TcpSession::TakeStaged(uint64_t& payload_read) {
  std::byte* into = nullptr;
  uint64_t want = 0;
  switch (rx_) {
    case Rx::kHeader:
      into = header_bytes_.data();
      want = kHeaderBytes;
      break;
    case Rx::kControl:
      into = control_.data();
      want = current_.length;
      break;
    case Rx::kPayload:
      into = landing_;
      want = current_.length;
      break;
  }
  const size_t take = std::min<uint64_t>(want - have_, staged_end_ - staged_begin_);
  std::memcpy(into + have_, stage_.data() + staged_begin_, take);
  if (rx_ == Rx::kPayload) payload_read += take;
  staged_begin_ += take;
  have_ += take;
  if (have_ < want) return false;
  have_ = 0;
  if (rx_ == Rx::kHeader) {
    OnHeader();
    return false;
  }
  if (rx_ == Rx::kControl) {
    rx_ = Rx::kHeader;
    OnControl();
    return false;
  }
  OnPayloadDone();
  return true;
}

void TcpSession::OnHeader() {
  absl::StatusOr<SegmentHeader> header = Decode(header_bytes_.data(), header_bytes_.size());
  if (!header.ok()) {
    // A HELLO of another version is refused in that version, so that its daemon can say why.
    const std::optional<ForeignHeader> foreign =
        state_ == State::kAwaitHello ? DecodeForeign(header_bytes_.data(), header_bytes_.size())
                                     : std::nullopt;
    if (foreign) {
      comm_ = foreign->header.comm;
      return Refuse(absl::FailedPreconditionError(absl::StrCat(
                        "the HELLO came in data wire version ", foreign->version, " and daemon ",
                        engine_.address(), " speaks version ", kWireVersion,
                        ": all daemons of a communicator must speak one data wire version")),
                    foreign->version);
    }
    engine_.CountWireError();
    spdlog::warn("closing {}: {}", Name(), std::string(header.status().message()));
    return Fail(header.status());
  }
  current_ = *header;
  const bool first = state_ == State::kAwaitHello;
  if (!first && current_.comm != comm_) {
    engine_.CountWireError();
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("segment for communicator ", CommIdHex(current_.comm), " on the ", Name())));
  }
  if (current_.type == SegmentType::kControl) {
    control_.resize(current_.length);
    rx_ = Rx::kControl;
    return;
  }
  if (state_ != State::kUp) {
    engine_.CountWireError();
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("data segment before the handshake finished on the ", Name())));
  }
  Offer();
}

void TcpSession::Offer() {
  absl::StatusOr<std::byte*> landing = engine_.handler().OnSegment(*this, current_);
  if (state_ == State::kClosed) return;
  if (!landing.ok()) return Fail(landing.status());
  if (current_.length == 0) return OnPayloadDone();
  landing_ = *landing;
  rx_ = Rx::kPayload;
  have_ = 0;
}

void TcpSession::OnPayloadPart() {
  if (rx_ != Rx::kPayload || have_ == 0 || state_ == State::kClosed) return;
  absl::Status status = engine_.handler().OnPayloadPart(*this, current_, have_);
  if (state_ != State::kClosed && !status.ok()) Fail(status);
}

void TcpSession::OnPayloadDone() {
  rx_ = Rx::kHeader;
  have_ = 0;
  absl::Status status = engine_.handler().OnPayload(*this, current_);
  if (state_ != State::kClosed && !status.ok()) Fail(status);
}

void TcpSession::Evict() {
  if (state_ == State::kParked) {  // authenticated: the peer and the handler hear why
    return Refuse(absl::ResourceExhaustedError(absl::StrCat(
        "more than ", kMaxAcceptedHandshakes, " data sessions at engine ", engine_.address(),
        " were in their handshake or waiting for their communicator; the oldest is closed")));
  }
  engine_.CountWireError();
  CloseSocket();
}

void TcpSession::ExpireHandshake() {
  if (state_ == State::kClosed) return;
  if (state_ == State::kParked) {
    return Refuse(absl::DeadlineExceededError(absl::StrCat(
        "communicator ", CommIdHex(comm_), " was not configured at engine ", engine_.address(),
        " within the handshake timeout of ", absl::FormatDuration(engine_.handshake_timeout()))));
  }
  engine_.CountWireError();
  // A connect still waiting got no SYN-ACK: a host cut off drops it silently.
  const absl::Status reason = absl::DeadlineExceededError(absl::StrCat(
      "handshake of the ", Name(), " did not finish within the handshake timeout of ",
      absl::FormatDuration(engine_.handshake_timeout()),
      state_ == State::kConnecting
          ? ": its connect got no answer (the host unreachable, or the port filtered or overloaded)"
          : ""));
  spdlog::warn("{}", std::string(reason.message()));
  Fail(reason);
}

}  // namespace cclo::hw::poe::tcp
