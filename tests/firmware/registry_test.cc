#include "firmware/registry.h"

#include <bit>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/types.h"

namespace cclo::firmware {
namespace {

using hw::Collective;
using ::testing::HasSubstr;

hw::CallDescriptor Call(Collective collective, uint32_t rank) {
  hw::CallDescriptor call;
  call.collective = collective;
  call.rank = rank;
  call.count = 10;
  return call;
}

void ExpectInvalid(const hw::CallDescriptor& call, uint32_t world_size,
                   const std::string& message) {
  const absl::StatusOr<hw::Program> program = Generate(call, world_size);
  ASSERT_FALSE(program.ok()) << message;
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(program.status().message()), HasSubstr(message));
}

TEST(RegistryTest, EveryCollectiveHasAnAlgorithmAndNamesAreUnique) {
  std::set<std::pair<Collective, std::string>> seen;
  for (const Algorithm& algorithm : AllAlgorithms()) {
    EXPECT_TRUE(seen.insert({algorithm.collective, std::string(algorithm.name)}).second)
        << algorithm.name;
    EXPECT_FALSE(algorithm.description.empty()) << algorithm.name;
    EXPECT_FALSE(algorithm.constraints.empty()) << algorithm.name;
    EXPECT_NE(algorithm.generate, nullptr) << algorithm.name;
  }
  for (int value = 0; value <= static_cast<int>(hw::kLastCollective); ++value) {
    const auto collective = static_cast<Collective>(value);
    EXPECT_FALSE(ForCollective(collective).empty()) << hw::CollectiveName(collective);
  }
}

TEST(RegistryTest, DefaultSelectionBySizeAndWorld) {
  // Every choice is a registered algorithm of the collective.
  for (int value = 0; value <= static_cast<int>(hw::kLastCollective); ++value) {
    const auto collective = static_cast<Collective>(value);
    for (uint64_t bytes : {0ull, 4ull << 10, 64ull << 10, 1ull << 20, 1ull << 30}) {
      for (uint32_t world_size : {1u, 2u, 3u, 4u, 5u, 8u, 13u}) {
        const Algorithm& chosen = DefaultFor(collective, bytes, world_size);
        EXPECT_EQ(chosen.collective, collective);
        EXPECT_EQ(Find(collective, chosen.name), &chosen);
      }
    }
  }
  // Latency-bound small messages take few steps; large ones spread bytes over all links.
  EXPECT_EQ(DefaultFor(Collective::kAllreduce, 1024, 8).name, "recursive_doubling");
  EXPECT_EQ(DefaultFor(Collective::kAllreduce, (256 << 10) - 1, 2).name, "recursive_doubling");
  EXPECT_EQ(DefaultFor(Collective::kAllreduce, 256 << 10, 2).name, "ring");
  EXPECT_EQ(DefaultFor(Collective::kAllreduce, 16 << 20, 8).name, "ring");
  EXPECT_EQ(DefaultFor(Collective::kBcast, 1024, 8).name, "binomial_tree");
  EXPECT_EQ(DefaultFor(Collective::kBcast, 16 << 20, 8).name, "chain");
  EXPECT_EQ(DefaultFor(Collective::kAllgather, 1024, 8).name, "recursive_doubling");
  EXPECT_EQ(DefaultFor(Collective::kAllgather, 1024, 6).name, "ring");
  EXPECT_EQ(DefaultFor(Collective::kAlltoall, 16 << 20, 8).name, "pairwise");
  EXPECT_EQ(DefaultFor(Collective::kBarrier, 0, 8).name, "dissemination");
}

/// The collective named `name` ("bcast", "reduce_scatter"), if there is one.
std::optional<Collective> CollectiveNamed(const std::string& name) {
  for (int value = 0; value <= static_cast<int>(hw::kLastCollective); ++value) {
    const auto collective = static_cast<Collective>(value);
    if (hw::CollectiveName(collective) == name) return collective;
  }
  return std::nullopt;
}

/// The number in `clause` between `prefix` and `suffix`, if `clause` reads so.
std::optional<uint64_t> NumberIn(absl::string_view clause, absl::string_view prefix,
                                 absl::string_view suffix) {
  uint64_t number = 0;
  if (!absl::ConsumePrefix(&clause, prefix) || !absl::ConsumeSuffix(&clause, suffix) ||
      !absl::SimpleAtoi(clause, &number)) {
    return std::nullopt;
  }
  return number;
}

/// Whether `condition` of docs/algorithms.md's selection table ("< 64 KiB and P ≥ 5",
/// "P a power of two ≥ 4", "else") holds for `bytes` and `world_size`; a condition it
/// cannot read fails the test.
bool Holds(absl::string_view condition, uint64_t bytes, uint32_t world_size) {
  if (condition == "else") return true;
  for (absl::string_view clause : absl::StrSplit(condition, " and ")) {
    if (std::optional<uint64_t> kib = NumberIn(clause, "< ", " KiB")) {
      if (bytes >= *kib << 10) return false;
    } else if (std::optional<uint64_t> least = NumberIn(clause, "P ≥ ", "")) {
      if (world_size < *least) return false;
    } else if (std::optional<uint64_t> least = NumberIn(clause, "P a power of two ≥ ", "")) {
      if (world_size < *least || !std::has_single_bit(world_size)) return false;
    } else {
      ADD_FAILURE() << "cannot read the condition '" << clause << "'";
      return false;
    }
  }
  return true;
}

// docs/algorithms.md's default selection table states the built-in rules: for every size
// on both sides of each limit and every world size up to 16, its first matching rule names
// the algorithm DefaultFor chooses. Its selection number is kSelectionVersion.
TEST(RegistryTest, DocumentedDefaultSelectionIsTheBuiltIn) {
  const char* root = std::getenv("TEST_SRCDIR");
  const absl::StatusOr<std::string> doc = hw::ReadTextFile(
      "algorithms.md", absl::StrCat(root ? root : ".", "/cclod/docs/algorithms.md"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const std::string selection = absl::StrCat("This is selection ", kSelectionVersion, " (");
  EXPECT_TRUE(absl::StrContains(*doc, selection)) << "algorithms.md lacks '" << selection << "'";
  const std::string table = doc->substr(doc->find("\n## Default selection\n"));
  std::set<Collective> documented;
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    // "| scatter / gather | < 16 KiB and P ≥ 5: `tree`; else `one_to_all` / `all_to_one` |"
    std::vector<absl::string_view> cells = absl::StrSplit(line, " | ");
    if (cells.size() != 2 || !absl::ConsumePrefix(&cells[0], "| ") ||
        !absl::ConsumeSuffix(&cells[1], " |") || cells[0] == "collective") {
      continue;
    }
    const std::vector<absl::string_view> names = absl::StrSplit(cells[0], " / ");
    for (size_t which = 0; which < names.size(); ++which) {
      const std::optional<Collective> collective = CollectiveNamed(std::string(names[which]));
      ASSERT_TRUE(collective.has_value()) << line;
      documented.insert(*collective);
      for (uint64_t bytes : {0ull, 1ull, 16383ull, 16384ull, 65535ull, 65536ull, 262143ull,
                             262144ull, 524287ull, 524288ull, 16ull << 20, 1ull << 30}) {
        for (uint32_t world_size = 1; world_size <= 16; ++world_size) {
          std::string rule_algorithm;
          for (absl::string_view rule : absl::StrSplit(cells[1], "; ")) {
            // "< 64 KiB and P ≥ 5: `binomial_tree`", "else `ring`" or "`ring`" alone.
            std::vector<absl::string_view> parts = absl::StrSplit(rule, '`');
            ASSERT_GE(parts.size(), 3u) << rule;
            const absl::string_view condition =
                absl::StripSuffix(absl::StripAsciiWhitespace(parts[0]), ":");
            if (!condition.empty() && !Holds(condition, bytes, world_size)) continue;
            // One name for every collective of the row, or one per collective ("a` / `b").
            rule_algorithm = std::string(parts[parts.size() == 3 ? 1 : 1 + 2 * which]);
            break;
          }
          EXPECT_EQ(DefaultFor(*collective, bytes, world_size).name, rule_algorithm)
              << names[which] << " of " << bytes << " bytes on " << world_size
              << " ranks: " << line;
        }
      }
    }
  }
  // Every collective with a choice of algorithms has its row.
  for (int value = 0; value <= static_cast<int>(hw::kLastCollective); ++value) {
    const auto collective = static_cast<Collective>(value);
    if (ForCollective(collective).size() > 1) {
      EXPECT_TRUE(documented.count(collective)) << hw::CollectiveName(collective);
    }
  }
}

TEST(RegistryTest, FindsByCollectiveAndName) {
  ASSERT_NE(Find(Collective::kAllreduce, "ring"), nullptr);
  EXPECT_EQ(Find(Collective::kAllreduce, "ring")->collective, Collective::kAllreduce);
  EXPECT_NE(Find(Collective::kBcast, "one_to_all"), nullptr);
  EXPECT_NE(Find(Collective::kSend, "direct"), nullptr);
  EXPECT_NE(Find(Collective::kRecv, "direct"), nullptr);
  EXPECT_EQ(Find(Collective::kBcast, "ring"), nullptr);
  EXPECT_EQ(Find(Collective::kAllreduce, "nope"), nullptr);
  EXPECT_TRUE(ForCollective(static_cast<Collective>(99)).empty());
}

TEST(RegistryTest, DefaultAndForcedAlgorithm) {
  hw::CallDescriptor call = Call(Collective::kAllreduce, 1);
  absl::StatusOr<hw::Program> program = Generate(call, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "recursive_doubling");  // 10 elements: latency-bound
  EXPECT_EQ(program->algorithm_place, PlaceOf(*Find(Collective::kAllreduce, "recursive_doubling")));
  call.algorithm = "ring";
  program = Generate(call, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "ring");
  EXPECT_EQ(program->algorithm_place, PlaceOf(*Find(Collective::kAllreduce, "ring")));
}

// An algorithm's place in its collective's table, which messages carry, names it back; a
// place no algorithm has (another build's) is named as a number.
TEST(RegistryTest, PlacesNameTheirAlgorithms) {
  for (const Algorithm& algorithm : AllAlgorithms()) {
    const std::vector<const Algorithm*> table = ForCollective(algorithm.collective);
    EXPECT_EQ(table.at(PlaceOf(algorithm) - 1), &algorithm) << algorithm.name;
    EXPECT_EQ(NameAt(algorithm.collective, PlaceOf(algorithm)), algorithm.name);
    EXPECT_EQ(PlacesIn(algorithm.collective), table.size()) << algorithm.name;
  }
  EXPECT_EQ(NameAt(Collective::kAllreduce, 0), "algorithm 0");
  const auto places = static_cast<uint8_t>(ForCollective(Collective::kAllreduce).size() + 1);
  EXPECT_EQ(NameAt(Collective::kAllreduce, places), absl::StrCat("algorithm ", places));
}

TEST(RegistryTest, NopIsEmpty) {
  const absl::StatusOr<hw::Program> program = Generate(Call(Collective::kNop, 0), 3);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_TRUE(program->moves.empty());
}

TEST(RegistryTest, UnknownAlgorithmListsValidNames) {
  hw::CallDescriptor call = Call(Collective::kAllreduce, 0);
  call.algorithm = "butterfly";
  ExpectInvalid(call, 4,
                "unknown allreduce algorithm 'butterfly'; valid: ring, recursive_doubling, "
                "reduce_bcast");
  call = Call(Collective::kBarrier, 0);
  call.algorithm = "ring";
  ExpectInvalid(call, 4, "unknown barrier algorithm 'ring'; valid: dissemination");
  // A command slot's name may be any bytes; the error, an RPC's text, must be UTF-8.
  call.algorithm = "caf\xe9\n";
  ExpectInvalid(call, 4, "unknown barrier algorithm 'caf\\xe9\\n'; valid: dissemination");
}

TEST(RegistryTest, RejectsBadRankRootAndSizes) {
  ExpectInvalid(Call(Collective::kAllreduce, 4), 4, "rank 4 out of range for world size 4");
  ExpectInvalid(Call(Collective::kAllreduce, 0), 0, "world size 0");
  hw::CallDescriptor call = Call(Collective::kBcast, 0);
  call.root = 7;
  ExpectInvalid(call, 3, "bcast root 7 out of range for world size 3");
  for (Collective rooted : {Collective::kScatter, Collective::kGather, Collective::kReduce}) {
    call = Call(rooted, 0);
    call.root = 3;
    ExpectInvalid(call, 3, std::string(hw::CollectiveName(rooted)) + " root 3 out of range");
  }
  call = Call(Collective::kAllreduce, 0);
  call.root = 7;  // ignored by allreduce
  EXPECT_TRUE(Generate(call, 3).ok());
}

TEST(RegistryTest, InPlaceOnlyWhereMpiHasIt) {
  hw::CallDescriptor call = Call(Collective::kBcast, 0);
  call.in_place = true;
  ExpectInvalid(call, 3, "bcast has no in-place variant");
  call = Call(Collective::kBarrier, 0);
  call.in_place = true;
  ExpectInvalid(call, 3, "barrier has no in-place variant");
  call = Call(Collective::kGather, 1);
  call.root = 2;
  call.in_place = true;
  ExpectInvalid(call, 3, "gather in place applies only at the root (rank 2), not at rank 1");
  call.rank = 2;
  EXPECT_TRUE(Generate(call, 3).ok());
  call = Call(Collective::kAlltoall, 1);
  call.in_place = true;
  EXPECT_TRUE(Generate(call, 3).ok());
}

TEST(RegistryTest, RejectsBadPeerAndTag) {
  hw::CallDescriptor call = Call(Collective::kSend, 1);
  call.peer = 1;  // the rank itself, as MPI and NCCL allow
  EXPECT_TRUE(Generate(call, 3).ok());
  call.peer = 3;
  ExpectInvalid(call, 3, "send peer 3 out of range for world size 3");
  call = Call(Collective::kRecv, 0);
  call.peer = 2;
  call.tag = hw::kCollectiveTag;
  ExpectInvalid(call, 3, "recv tag 4294967295 is reserved for collectives");
  call.tag = 0;
  EXPECT_TRUE(Generate(call, 3).ok());
}

TEST(RegistryTest, RejectsUnknownEnumValues) {
  ExpectInvalid(Call(static_cast<Collective>(42), 0), 2, "unknown collective value 42");
  hw::CallDescriptor call = Call(Collective::kAllreduce, 0);
  call.datatype = static_cast<hw::DataType>(8);
  ExpectInvalid(call, 2, "unknown datatype value 8");
  call = Call(Collective::kAllreduce, 0);
  call.reduce_op = static_cast<hw::ReduceOp>(4);
  ExpectInvalid(call, 2, "unknown reduce op value 4");
}

}  // namespace
}  // namespace cclo::firmware
