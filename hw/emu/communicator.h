// A communicator as the software CCLO holds it: the installed rank table, the data
// sessions to the peer engines that host other ranks (two each, one per direction) with
// their eager credits in both directions, the ranks that left, the per-rank call queues and the
// sequence counters that make the k-th send match the k-th receive. Engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "hw/clock.h"
#include "hw/device.h"
#include "hw/poe/session.h"
#include "hw/types.h"

namespace cclo::hw::emu {

/// Where the data sessions to a peer engine stand.
enum class LinkState : uint8_t {
  kConnecting,  ///< not both up yet
  kUp,          ///< both authenticated and admitted
  kLeft,        ///< the peer engine left the communicator (closed its sessions with a goodbye)
  kLost,        ///< closed by a failure, or because the communicator broke
};
inline constexpr size_t kLinkStates = 4;

/// The data sessions to one peer engine of a communicator. Each engine sends everything
/// for that peer (data, requests, clear-to-sends, credits) on the session it opened and
/// receives on the one the peer opened, so each TCP connection carries data one way: on
/// loopback under BBR, exchanges from 1 MiB take 0.65-0.75 × the time they take over one
/// connection carrying both ways (docs/performance-log.md).
struct PeerLink {
  bool up() const { return state == LinkState::kUp; }

  /// Queues a segment to that peer on tx (Session::Send). Dropped, without `on_written`,
  /// once tx ended (tx_end): the peer's departure follows when rx ends.
  void Send(const poe::SegmentHeader& header, const std::byte* payload,
            std::function<void()> on_written) {
    if (tx != nullptr) tx->Send(header, payload, std::move(on_written));
  }

  poe::Session* tx = nullptr;  ///< opened by this engine; owned by the engine
  poe::Session* rx = nullptr;  ///< opened by that peer; null until admitted
  bool tx_up = false;          ///< the peer admitted tx
  /// How tx ended while rx stayed open (OK until then): the ranks depart when rx ends,
  /// and a lost tx outranks a goodbye on rx.
  absl::Status tx_end;
  /// When tx ended: until when the peer may take to end rx too (the engine's handshake
  /// timeout); past it rx is closed and the peer counts as lost.
  SteadyTime rx_end_deadline = SteadyTime::InfiniteFuture();
  bool granted = false;            ///< the peer's first credit segment arrived
  std::vector<uint32_t> ranks;     ///< ranks of the communicator that peer hosts
  std::vector<std::byte> scratch;  ///< where segments of reduce receives land, one segment
  /// Where the link stands; counted in Counters::links.
  LinkState state = LinkState::kConnecting;
  uint64_t segment_bytes = 0;  ///< largest segment to that peer; set when up
  /// Largest message sent eagerly to that peer: ours and its eager limit, the smaller.
  uint64_t eager_bytes = 0;
  uint64_t send_credits = 0;  ///< eager messages that peer has granted us room for
  uint64_t rx_account = 0;    ///< the RBM credit account of what that peer sends us; 0: none
};

struct Communicator {
  CommId id{};
  CommSecret secret{};
  std::vector<RankEntry> ranks;
  std::vector<bool> local;                ///< indexed by rank: hosted by this engine
  std::map<std::string, PeerLink> peers;  ///< by the peer engine's data address

  /// The tenant of its latest call here, whose engine work its arriving data counts as
  /// (none before the first call).
  std::optional<uint32_t> tenant;
  bool ready = false;   ///< every peer session is up; calls may run
  absl::Status broken;  ///< OK while healthy, else what every later call fails with
  /// Ranks that left (their engine's session ended, the engine told their departure, or
  /// one of this engine's left, DepartLocalRank), with why: a call that needs one of them
  /// to send or receive anything more fails with that; other calls go on.
  std::map<uint32_t, absl::Status> departed;
  StatusFn configured;  ///< pending ConfigureCommunicator callback
  SteadyTime configure_deadline = SteadyTime::InfiniteFuture();

  using Route = std::tuple<uint32_t, uint32_t, uint32_t>;  ///< (src, dst, tag)
  absl::flat_hash_map<Route, uint64_t> send_sequence;      ///< next sequence to send
  absl::flat_hash_map<Route, uint64_t> recv_sequence;      ///< next sequence to receive
  std::map<uint32_t, std::deque<uint64_t>> queues;         ///< call ids per local rank

  uint32_t size() const { return static_cast<uint32_t>(ranks.size()); }
};

}  // namespace cclo::hw::emu
