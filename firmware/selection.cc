// The built-in default selection: which algorithm runs a collective when the call names
// none, by message size and world size. First matching rule wins; the last rule of each
// collective matches everything. The rules follow the usual trade-off: latency-bound small
// messages take the algorithms with the fewest steps (trees, recursive doubling, one
// message per peer), bandwidth-bound large ones the algorithms that spread the bytes
// evenly over every link (rings, pipelined chains, pairwise exchange).
#include <array>
#include <bit>
#include <cstdint>
#include <string_view>

#include "firmware/registry.h"

namespace cclo::firmware {
namespace {

using hw::Collective;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kNoLimit = UINT64_MAX;

struct Rule {
  Collective collective;
  uint64_t below_bytes;     ///< the rule applies to messages smaller than this
  uint32_t min_world_size;  ///< and to worlds at least this big
  bool power_of_two;        ///< and, if set, only to power-of-two worlds
  std::string_view algorithm;
};

// `bytes` is one rank's contribution: count x datatype size. Any change here takes the next
// kSelectionVersion (registry.h): daemons of different selections must not share a
// communicator.
constexpr std::array kRules = {
    Rule{Collective::kSend, kNoLimit, 1, false, "direct"},
    Rule{Collective::kRecv, kNoLimit, 1, false, "direct"},
    Rule{Collective::kBcast, 64 * kKiB, 5, false, "binomial_tree"},
    Rule{Collective::kBcast, 512 * kKiB, 1, false, "one_to_all"},
    Rule{Collective::kBcast, kNoLimit, 3, false, "chain"},
    Rule{Collective::kBcast, kNoLimit, 1, false, "one_to_all"},
    Rule{Collective::kScatter, 16 * kKiB, 5, false, "tree"},
    Rule{Collective::kScatter, kNoLimit, 1, false, "one_to_all"},
    Rule{Collective::kGather, 16 * kKiB, 5, false, "tree"},
    Rule{Collective::kGather, kNoLimit, 1, false, "all_to_one"},
    Rule{Collective::kAllgather, 64 * kKiB, 4, true, "recursive_doubling"},
    Rule{Collective::kAllgather, kNoLimit, 1, false, "ring"},
    Rule{Collective::kReduce, 64 * kKiB, 5, false, "binary_tree"},
    Rule{Collective::kReduce, 512 * kKiB, 1, false, "all_to_one"},
    Rule{Collective::kReduce, kNoLimit, 3, false, "ring"},
    Rule{Collective::kReduce, kNoLimit, 1, false, "all_to_one"},
    Rule{Collective::kAllreduce, 256 * kKiB, 1, false, "recursive_doubling"},
    Rule{Collective::kAllreduce, kNoLimit, 1, false, "ring"},
    Rule{Collective::kReduceScatter, kNoLimit, 1, false, "ring"},
    Rule{Collective::kAlltoall, 64 * kKiB, 1, false, "linear"},
    Rule{Collective::kAlltoall, kNoLimit, 5, false, "pairwise"},
    Rule{Collective::kAlltoall, kNoLimit, 1, false, "linear"},
    Rule{Collective::kBarrier, kNoLimit, 1, false, "dissemination"},
    Rule{Collective::kNop, kNoLimit, 1, false, "nop"},
};

}  // namespace

const Algorithm& DefaultFor(Collective collective, uint64_t bytes, uint32_t world_size) {
  for (const Rule& rule : kRules) {
    if (rule.collective != collective || bytes >= rule.below_bytes ||
        world_size < rule.min_world_size || (rule.power_of_two && !std::has_single_bit(world_size))) {
      continue;
    }
    if (const Algorithm* algorithm = Find(collective, rule.algorithm)) return *algorithm;
  }
  return *ForCollective(collective).front();
}

}  // namespace cclo::firmware
