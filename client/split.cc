// Client::Split: MPI_Comm_split built from a communicator's own collectives and the
// daemons' create/join. Every rank
//   1. allgathers (color, key) over the parent, in place in one scratch buffer;
//   2. works out its group (same color, ordered by key then parent rank);
//   3. the group's first member makes a token; a second in-place allgather of fixed-size
//      token slots hands it to every rank;
//   4. joins its group's token with its new rank and the group's size.
// Cost: two allgathers on the parent (16 and kTokenSlot bytes per rank) and one join.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "hw/clock.h"

namespace cclo {
namespace {

/// Bytes per rank for a token in the second exchange, its terminating NUL included.
constexpr uint64_t kTokenSlot = 512;

struct Member {
  int64_t key;
  uint32_t rank;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Client::Split(Communicator& parent, int32_t color,
                                                            int32_t key, absl::Duration timeout) {
  if (timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("split timeout ", absl::FormatDuration(timeout), " is negative"));
  }
  const uint32_t size = parent.size();
  const uint32_t rank = parent.rank();
  // One deadline for the whole split: each step gets what is left of `timeout` (at least
  // 1 ms, so that a step past it still fails on every rank). Zero: the daemon's defaults.
  const hw::SteadyTime deadline = hw::SteadyNow() + timeout;
  auto left = [&] {
    return timeout == absl::ZeroDuration()
               ? timeout
               : std::max(deadline - hw::SteadyNow(), absl::Milliseconds(1));
  };
  absl::StatusOr<Buffer> scratch = AllocBuffer(size * kTokenSlot);
  if (!scratch.ok()) return scratch.status();
  auto* bytes = static_cast<char*>(scratch->data());
  auto in_place = [&] { return OpOptions{.timeout = left(), .in_place = true}; };

  // 1. Everyone's (color, key).
  auto pairs = scratch->span<int64_t>();
  pairs[2 * rank] = color;
  pairs[2 * rank + 1] = key;
  if (absl::Status status = parent.Allgather(*scratch, *scratch, 2, DataType::kInt64, in_place());
      !status.ok()) {
    FreeBuffer(*std::move(scratch)).IgnoreError();  // the exchange's error says more
    return status;
  }
  // 2. This rank's group, in new-rank order.
  std::vector<Member> group;
  for (uint32_t other = 0; other < size; ++other) {
    if (color >= 0 && pairs[2 * other] == color) group.push_back({pairs[2 * other + 1], other});
  }
  std::sort(group.begin(), group.end(), [](const Member& a, const Member& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });

  // 3. The first member of each group makes the token; everyone learns all tokens.
  std::memset(bytes, 0, size * kTokenSlot);
  absl::Status made = absl::OkStatus();
  if (!group.empty() && group.front().rank == rank) {
    absl::StatusOr<std::string> token = CreateCommunicatorId();
    if (!token.ok()) {
      made = token.status();
    } else if (token->size() >= kTokenSlot) {
      made = absl::InternalError(absl::StrCat("token of ", token->size(), " bytes exceeds ",
                                              kTokenSlot - 1));
    } else {
      std::memcpy(bytes + rank * kTokenSlot, token->data(), token->size());
    }
  }
  absl::Status exchanged =
      parent.Allgather(*scratch, *scratch, kTokenSlot, DataType::kUint8, in_place());
  const std::string token =
      group.empty() ? "" : std::string(bytes + group.front().rank * kTokenSlot);
  const absl::Status freed = FreeBuffer(*std::move(scratch));
  if (!made.ok()) return made;
  if (!exchanged.ok()) return exchanged;
  if (!freed.ok()) return freed;
  if (group.empty()) return std::unique_ptr<Communicator>();
  if (token.empty()) {
    return absl::UnavailableError(absl::StrCat("split: rank ", group.front().rank,
                                               " of the parent, first of color ", color,
                                               ", could not make the new communicator"));
  }

  // 4. Join as this rank's place in the group.
  const auto place = std::find_if(group.begin(), group.end(),
                                  [rank](const Member& member) { return member.rank == rank; });
  return Join(token, static_cast<uint32_t>(place - group.begin()),
              static_cast<uint32_t>(group.size()), left());
}

}  // namespace cclo
