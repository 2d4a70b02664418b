// A communicator as the software CCLO holds it: the installed rank table, the data
// sessions to the peer engines that host other ranks with their eager credits in both
// directions, the ranks that left, the per-rank call queues and the sequence counters
// that make the k-th send match the k-th receive.
// Engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "hw/device.h"
#include "hw/poe/session.h"
#include "hw/types.h"

namespace cclo::hw::emu {

/// Where the data session to a peer engine stands.
enum class LinkState : uint8_t {
  kConnecting,  ///< not up yet
  kUp,          ///< authenticated and admitted on both sides
  kLeft,        ///< the peer engine left the communicator (closed the session with a goodbye)
  kLost,        ///< closed by a failure, or because the communicator broke
};
inline constexpr size_t kLinkStates = 4;

/// The data session to one peer engine of a communicator.
struct PeerLink {
  bool up() const { return state == LinkState::kUp; }

  poe::Session* session = nullptr;  ///< owned by the engine; null until connected/accepted
  bool granted = false;             ///< the peer's first credit segment arrived
  std::vector<uint32_t> ranks;      ///< ranks of the communicator that peer hosts
  std::vector<std::byte> scratch;   ///< where segments of reduce receives land, one segment
  /// Where the session stands; counted in Counters::links.
  LinkState state = LinkState::kConnecting;
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
  /// Ranks whose engine left (its session ended), with why: a call that needs one of
  /// them to send or receive anything more fails with that; other calls go on.
  std::map<uint32_t, absl::Status> departed;
  StatusFn configured;  ///< pending ConfigureCommunicator callback
  absl::Time configure_deadline = absl::InfiniteFuture();

  using Route = std::tuple<uint32_t, uint32_t, uint32_t>;  ///< (src, dst, tag)
  absl::flat_hash_map<Route, uint64_t> send_sequence;      ///< next sequence to send
  absl::flat_hash_map<Route, uint64_t> recv_sequence;      ///< next sequence to receive
  std::map<uint32_t, std::deque<uint64_t>> queues;         ///< call ids per local rank

  uint32_t size() const { return static_cast<uint32_t>(ranks.size()); }
};

}  // namespace cclo::hw::emu
