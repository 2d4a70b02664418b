#include "firmware/registry.h"

#include <set>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
  for (Collective collective : {Collective::kNop, Collective::kSend, Collective::kRecv,
                                Collective::kBcast, Collective::kAllreduce}) {
    EXPECT_FALSE(ForCollective(collective).empty()) << hw::CollectiveName(collective);
    EXPECT_EQ(&DefaultFor(collective, 1 << 20, 8), ForCollective(collective).front());
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
  EXPECT_EQ(program->algorithm, "ring");
  call.algorithm = "ring";
  program = Generate(call, 4);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->algorithm, "ring");
}

TEST(RegistryTest, NopIsEmpty) {
  const absl::StatusOr<hw::Program> program = Generate(Call(Collective::kNop, 0), 3);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_TRUE(program->moves.empty());
}

TEST(RegistryTest, UnknownAlgorithmListsValidNames) {
  hw::CallDescriptor call = Call(Collective::kAllreduce, 0);
  call.algorithm = "butterfly";
  ExpectInvalid(call, 4, "unknown allreduce algorithm 'butterfly'; valid: ring");
  call = Call(Collective::kBcast, 0);
  call.algorithm = "ring";
  ExpectInvalid(call, 4, "unknown bcast algorithm 'ring'; valid: one_to_all");
}

TEST(RegistryTest, RejectsBadRankRootAndSizes) {
  ExpectInvalid(Call(Collective::kAllreduce, 4), 4, "rank 4 out of range for world size 4");
  ExpectInvalid(Call(Collective::kAllreduce, 0), 0, "world size 0");
  hw::CallDescriptor call = Call(Collective::kBcast, 0);
  call.root = 7;
  ExpectInvalid(call, 3, "bcast root 7 out of range for world size 3");
  call = Call(Collective::kAllreduce, 0);
  call.root = 7;  // ignored by allreduce
  EXPECT_TRUE(Generate(call, 3).ok());
}

TEST(RegistryTest, RejectsBadPeerAndTag) {
  hw::CallDescriptor call = Call(Collective::kSend, 1);
  call.peer = 1;
  ExpectInvalid(call, 3, "send peer 1 is the calling rank itself");
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
