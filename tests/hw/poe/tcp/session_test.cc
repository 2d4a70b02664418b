// TcpSession's reading: at most one data payload read from the socket per session and loop
// turn, so a session streaming segments lets the rest of the engine run between them; small
// segments that came in one read-ahead are handled together.
#include "hw/poe/tcp/session.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hw/clock.h"
#include "hw/poe/tcp/engine.h"
#include "tests/hw/emu/fake_peer.h"

namespace cclo::hw::poe::tcp {
namespace {

using emu::testing::FakePeer;
using emu::testing::Pattern;
using emu::testing::TestComm;

/// Admits every session of `comm` and records, for each payload, how many loop turns
/// (OnTimer calls) came before it.
class RecordingHandler : public EngineHandler {
 public:
  RecordingHandler(const TestComm& comm, size_t payloads) : comm_(comm), expected_(payloads) {}

  absl::StatusOr<CommSecret> Secret(const CommId&) override { return comm_.config.secret; }
  void OnAuthenticated(Session& session) override { session.Admit(); }
  void OnSessionUp(Session&) override {}
  void OnSessionClosed(Session&, const absl::Status&) override {}
  absl::StatusOr<std::byte*> OnSegment(Session&, const SegmentHeader& header) override {
    landing_.resize(header.length);
    return landing_.data();
  }
  absl::Status OnPayloadPart(Session&, const SegmentHeader&, uint64_t landed) override {
    landed_by_turn_.emplace_back(turns_, landed);
    return absl::OkStatus();
  }
  absl::Status OnPayload(Session&, const SegmentHeader& header) override {
    landed_by_turn_.emplace_back(turns_, header.length);
    payloads_.emplace_back(landing_.begin(), landing_.begin() + header.length);
    turns_at_payload_.push_back(turns_);
    if (turns_at_payload_.size() == expected_) all_in_.set_value();
    return absl::OkStatus();
  }
  hw::SteadyTime OnTimer(hw::SteadyTime) override {
    ++turns_;
    return hw::SteadyTime::InfiniteFuture();
  }

  std::future<void> AllIn() { return all_in_.get_future(); }
  /// Read once the engine stopped.
  const std::vector<uint64_t>& turns_at_payload() const { return turns_at_payload_; }
  /// Each payload's bytes, in order. Read once the engine stopped.
  const std::vector<std::vector<std::byte>>& payloads() const { return payloads_; }
  /// (loop turn, payload bytes in place) each time a payload was left partly read or
  /// finished. Read once the engine stopped.
  const std::vector<std::pair<uint64_t, uint64_t>>& landed_by_turn() const {
    return landed_by_turn_;
  }

 private:
  const TestComm& comm_;
  const size_t expected_;
  std::vector<std::byte> landing_;
  uint64_t turns_ = 0;
  std::vector<uint64_t> turns_at_payload_;
  std::vector<std::pair<uint64_t, uint64_t>> landed_by_turn_;
  std::vector<std::vector<std::byte>> payloads_;
  std::promise<void> all_in_;
};

/// An engine whose data session with a fake peer (communicator 7) is up once Start() has
/// returned without a fatal failure; `handler` records its payloads.
struct UpSession {
  explicit UpSession(size_t payloads) : handler(comm, payloads) {
    comm.config.id = CommId{7};
    comm.config.secret = CommSecret{8};
  }

  void Start(const TcpEngineConfig& config) {
    absl::StatusOr<EnginePtr> started = CreateTcpEngine(config, &handler);
    ASSERT_TRUE(started.ok()) << started.status();
    engine = *std::move(started);
    ASSERT_TRUE(engine->Start().ok());
    peer.emplace(engine->address(), comm);
    peer->Authenticate(comm.config.secret);
    absl::StatusOr<ControlMessage> accept = peer->ReadControl();
    ASSERT_TRUE(accept.ok()) << accept.status();
    ASSERT_EQ(accept->kind, ControlKind::kAccept);
  }

  /// Runs `write` while the engine waits, so that all it writes is readable at once, then
  /// waits for every payload and stops the engine.
  void WriteWhileWaiting(const std::function<void()>& write) {
    std::promise<void> written;
    engine->Post([wait = written.get_future().share()] { wait.wait(); });
    write();
    written.set_value();
    std::future<void> all_in = handler.AllIn();
    ASSERT_EQ(all_in.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    engine->Stop();
  }

  /// Writes the segments with their payloads in one write (one packet on loopback).
  void WriteAtOnce(const std::vector<std::pair<SegmentHeader, std::vector<std::byte>>>& segments) {
    std::vector<std::byte> stream;
    for (const auto& [header, payload] : segments) {
      SegmentHeader sized = header;
      sized.length = static_cast<uint32_t>(payload.size());
      const EncodedHeader encoded = Encode(sized);
      stream.insert(stream.end(), encoded.begin(), encoded.end());
      stream.insert(stream.end(), payload.begin(), payload.end());
    }
    peer->Write(stream.data(), stream.size());
  }

  TestComm comm;
  RecordingHandler handler;
  EnginePtr engine;
  std::optional<FakePeer> peer;
};

TEST(TcpSessionTest, ReadsOnePayloadPerLoopTurn) {
  constexpr size_t kSegments = 4;
  UpSession up(kSegments);
  ASSERT_NO_FATAL_FAILURE(up.Start({}));

  ASSERT_NO_FATAL_FAILURE(up.WriteWhileWaiting([&] {
    for (size_t i = 0; i < kSegments; ++i) {
      up.peer->SendSegment(
          up.peer->Message(SegmentType::kRendezvousData, 4096 * kSegments, 0, 4096 * i),
          Pattern(4096, static_cast<int>(i)));
    }
  }));

  const std::vector<uint64_t>& turns = up.handler.turns_at_payload();
  ASSERT_EQ(turns.size(), kSegments);
  for (size_t i = 1; i < kSegments; ++i) {
    EXPECT_LT(turns[i - 1], turns[i]) << "payloads " << i - 1 << " and " << i << " in one turn";
  }
}

// Small segments written together come in one read-ahead and are handled in one turn, a
// header cut by the end of a read-ahead included; each payload lands whole and in order.
TEST(TcpSessionTest, HandlesSmallSegmentsOfOneReadTogether) {
  // The first segment (64-byte header and 4000 bytes) leaves 32 bytes of the second
  // segment's header in the first read-ahead of 4096 bytes.
  const std::vector<size_t> sizes = {4000, 10, 100, 7};
  UpSession up(sizes.size());
  ASSERT_NO_FATAL_FAILURE(up.Start({}));

  uint64_t total = 0;
  for (size_t size : sizes) total += size;
  std::vector<std::pair<SegmentHeader, std::vector<std::byte>>> segments;
  uint64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    segments.emplace_back(up.peer->Message(SegmentType::kRendezvousData, total, 0, offset),
                          Pattern(sizes[i], static_cast<int>(i)));
    offset += sizes[i];
  }
  ASSERT_NO_FATAL_FAILURE(up.WriteWhileWaiting([&] { up.WriteAtOnce(segments); }));

  const std::vector<std::vector<std::byte>>& payloads = up.handler.payloads();
  ASSERT_EQ(payloads.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(payloads[i], Pattern(sizes[i], static_cast<int>(i))) << "payload " << i;
  }
  const std::vector<uint64_t>& turns = up.handler.turns_at_payload();
  EXPECT_LT(turns[0], turns[1]) << "the first read-ahead ends inside the second header";
  EXPECT_EQ(turns[1], turns[2]);
  EXPECT_EQ(turns[2], turns[3]);
}

// A readiness event reads ahead at most 4 KiB: of 100 bare headers (rendezvous requests)
// written together, the first 64 (4 KiB) are handled in one turn and the rest later.
TEST(TcpSessionTest, ReadsAheadAtMostOneStagePerTurn) {
  constexpr size_t kSegments = 100;
  UpSession up(kSegments);
  ASSERT_NO_FATAL_FAILURE(up.Start({}));

  std::vector<std::pair<SegmentHeader, std::vector<std::byte>>> segments(
      kSegments, {up.peer->Message(SegmentType::kRequest, 8), {}});
  ASSERT_NO_FATAL_FAILURE(up.WriteWhileWaiting([&] { up.WriteAtOnce(segments); }));

  const std::vector<uint64_t>& turns = up.handler.turns_at_payload();
  ASSERT_EQ(turns.size(), kSegments);
  EXPECT_EQ(turns[0], turns[63]);
  EXPECT_LT(turns[63], turns[64]);
}

// A session reads at most the turn bytes set on the engine (kTurnBytes until set) of a
// 1 MiB segment's payload per loop turn. (The default of 1 MiB cannot be checked this way:
// while the engine waits, the socket takes much less than that.)
TEST(TcpSessionTest, ReadsAtMostTheTurnBytesSetOnTheEngine) {
  constexpr size_t kBytes = 1 << 20;
  constexpr uint64_t turn_bytes = 64 << 10;
  UpSession up(1);
  ASSERT_NO_FATAL_FAILURE(up.Start({.segment_bytes = kBytes}));

  // The engine takes the turn bytes, then waits while the segment is written (as far as
  // the socket takes it, for at most a few seconds), so much more than a turn's worth is
  // readable at once. Writing starts only once it waits: a read before the new turn bytes
  // took effect would take the whole segment.
  std::promise<void> written, waiting;
  std::shared_future<void> done_writing = written.get_future().share();
  up.engine->Post([&up, &waiting, done_writing] {
    up.engine->SetTurnBytes(turn_bytes);
    waiting.set_value();
    done_writing.wait_for(std::chrono::seconds(3));
  });
  ASSERT_EQ(waiting.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  std::thread writer([&] {
    up.peer->SendSegment(up.peer->Message(SegmentType::kRendezvousData, kBytes),
                         Pattern(kBytes, 1));
    written.set_value();
  });
  std::future<void> all_in = up.handler.AllIn();
  ASSERT_EQ(all_in.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  writer.join();
  up.engine->Stop();

  // Whatever was readable, no turn took more than turn_bytes of the payload, and the
  // first turn after the wait took all of it (the bound was met, not just never reached).
  const auto& landed = up.handler.landed_by_turn();
  ASSERT_FALSE(landed.empty());
  EXPECT_EQ(landed.back().second, kBytes);
  EXPECT_GE(landed.size(), kBytes / turn_bytes);
  uint64_t before = 0;
  uint64_t most = 0;
  for (const auto& [turn, bytes] : landed) {
    EXPECT_LE(bytes - before, turn_bytes) << "turn " << turn;
    most = std::max(most, bytes - before);
    before = bytes;
  }
  EXPECT_EQ(most, turn_bytes);
}

}  // namespace
}  // namespace cclo::hw::poe::tcp
