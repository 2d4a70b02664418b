// Ranks that pass a collective different arguments of the same size (root, datatype,
// reduction) against real cclods, with both ranks on one daemon and on two: every message
// says what call sent it, so the receiving rank refuses it and the communicator breaks,
// naming both calls, instead of an op taking another call's data and giving wrong results.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "cclo/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/sessions.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

using ::testing::ContainsRegex;

constexpr uint64_t kCount = 4;

// One rank: its communicator and a send and a recv buffer of kCount 4-byte elements.
struct Rank {
  uint32_t rank;
  Communicator& comm;
  Buffer& send;
  Buffer& recv;
};

// Parameter: whether the two ranks are on two daemons (else both on the first).
class MismatchTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    daemons_[0] = new testing::Daemon();
    daemons_[1] = new testing::Daemon();
  }
  static void TearDownTestSuite() {
    for (testing::Daemon*& daemon : daemons_) {
      delete daemon;
      daemon = nullptr;
    }
  }

  // Joins a new communicator of two ranks and runs `body` for each in its own thread; the
  // statuses it returns are kept in results_.
  void ForEachRank(const std::function<absl::Status(Rank&)>& body) {
    testing::Group group = testing::JoinGroup(
        {daemons_[0]->runtime_dir(), daemons_[GetParam() ? 1 : 0]->runtime_dir()});
    std::thread threads[2];
    for (uint32_t rank = 0; rank < 2; ++rank) {
      threads[rank] = std::thread([&, rank] {
        absl::StatusOr<Buffer> send = group.clients[rank]->AllocBuffer(kCount * 4);
        absl::StatusOr<Buffer> recv = group.clients[rank]->AllocBuffer(kCount * 4);
        ASSERT_TRUE(send.ok() && recv.ok());
        Rank me{rank, *group.comms[rank], *send, *recv};
        results_[rank] = body(me);
      });
    }
    for (std::thread& thread : threads) thread.join();
  }

  // Both ranks' last ops failed, each saying which call sent the message and which call it
  // was given to (`calls`, a regular expression: "<sender's> sent to <receiver's>"), as
  // their completions carry it (255 bytes): the rank whose daemon did not refuse it gets
  // it behind that daemon's prefix.
  void ExpectRefused(const std::string& calls) {
    for (const absl::Status& result : results_) {
      EXPECT_FALSE(result.ok()) << "an op succeeded";
      EXPECT_THAT(std::string(result.message()), ContainsRegex(calls));
    }
  }

  absl::Status results_[2];
  static testing::Daemon* daemons_[2];
};

testing::Daemon* MismatchTest::daemons_[2] = {nullptr, nullptr};

// Each rank bcasts as its own root: both send and neither receives, so both bcasts end OK.
// The allreduce after them meets the other rank's bcast message where it expects its peer's
// allreduce message.
TEST_P(MismatchTest, RanksThatEachBcastAsRootBreakTheNextCollective) {
  ForEachRank([](Rank& me) -> absl::Status {
    absl::Status bcast = me.comm.Bcast(me.send, 0, kCount, DataType::kInt32, me.rank);
    if (!bcast.ok()) return bcast;
    return me.comm.Allreduce(me.send, me.recv, kCount, DataType::kInt32, ReduceOp::kSum);
  });
  ExpectRefused("bcast of int32 from root [01] sent to allreduce of int32 \\(sum\\)");
}

TEST_P(MismatchTest, DatatypesOfOneSizeThatDifferAreRefused) {
  ForEachRank([](Rank& me) {
    const DataType type = me.rank == 0 ? DataType::kInt32 : DataType::kFloat32;
    return me.comm.Allreduce(me.send, me.recv, kCount, type, ReduceOp::kSum);
  });
  ExpectRefused(
      "allreduce of (float32 \\(sum\\) sent to allreduce of int32|int32 \\(sum\\) sent to "
      "allreduce of float32) \\(sum\\)");
}

TEST_P(MismatchTest, ReductionsThatDifferAreRefused) {
  ForEachRank([](Rank& me) {
    const ReduceOp op = me.rank == 0 ? ReduceOp::kSum : ReduceOp::kMax;
    return me.comm.Allreduce(me.send, me.recv, kCount, DataType::kInt32, op);
  });
  ExpectRefused(
      "allreduce of int32 \\((max\\) sent to allreduce of int32 \\(sum|sum\\) sent to "
      "allreduce of int32 \\(max)\\)");
}

// Ranks that force different algorithms on one allreduce, whose messages have the sizes
// the other's receives expect (rank 1 took rank 0's input as the sum, and both said OK):
// the messages say their algorithm.
TEST_P(MismatchTest, AlgorithmsThatDifferAreRefused) {
  ForEachRank([](Rank& me) {
    return me.comm.Allreduce(me.send, me.recv, kCount, DataType::kFloat32, ReduceOp::kSum,
                             {.algorithm = me.rank == 0 ? "recursive_doubling" : "reduce_bcast"});
  });
  ExpectRefused(
      "allreduce of float32 \\(sum\\) by (recursive_doubling sent to allreduce of float32 "
      "\\(sum\\) by reduce_bcast|reduce_bcast sent to allreduce of float32 \\(sum\\) by "
      "recursive_doubling)");
}

// An op on the communicator once it broke says so once, then why.
TEST_P(MismatchTest, LaterOpsSayTheCommunicatorIsBrokenOnce) {
  ForEachRank([](Rank& me) -> absl::Status {
    const ReduceOp op = me.rank == 0 ? ReduceOp::kSum : ReduceOp::kMax;
    absl::Status refused = me.comm.Allreduce(me.send, me.recv, kCount, DataType::kInt32, op);
    EXPECT_FALSE(refused.ok());
    return me.comm.Barrier();
  });
  ExpectRefused(
      "allreduce of int32 \\((max\\) sent to allreduce of int32 \\(sum|sum\\) sent to "
      "allreduce of int32 \\(max)\\)");
  for (const absl::Status& result : results_) {
    EXPECT_THAT(std::string(result.message()),
                ContainsRegex("^Submit: communicator [0-9a-f]+ is broken: "));
    EXPECT_THAT(std::string(result.message()),
                ::testing::Not(ContainsRegex("is broken: .*is broken: ")));
  }
}

// An op refused on one rank, at submission (a root out of range) or by the engine (an
// algorithm it does not know), is as if not called: called again, it meets rank 1's
// allreduce, which waited for it, and both get the sum of their own inputs.
TEST_P(MismatchTest, AnOpRefusedOnOneRankAndCalledAgainMeetsTheOthers) {
  ForEachRank([](Rank& me) -> absl::Status {
    for (int32_t& value : me.send.span<int32_t>()) value = static_cast<int32_t>(me.rank + 1);
    if (me.rank == 0) {
      absl::Status refused = me.comm.Bcast(me.send, 0, kCount, DataType::kInt32, 2);
      EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
      refused = me.comm.Allreduce(me.send, me.recv, kCount, DataType::kInt32, ReduceOp::kSum,
                                  {.algorithm = "bogus"});
      EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
      EXPECT_THAT(std::string(refused.message()),
                  ContainsRegex("^unknown allreduce algorithm 'bogus'; valid: "));
    }
    absl::Status sum =
        me.comm.Allreduce(me.send, me.recv, kCount, DataType::kInt32, ReduceOp::kSum);
    if (!sum.ok()) return sum;
    for (int32_t value : me.recv.span<int32_t>()) EXPECT_EQ(value, 3);  // 1 + 2
    return absl::OkStatus();
  });
  EXPECT_TRUE(results_[0].ok()) << results_[0];
  EXPECT_TRUE(results_[1].ok()) << results_[1];
}

// The same arguments still work, on both layouts.
TEST_P(MismatchTest, MatchingCallsRunAsBefore) {
  ForEachRank([](Rank& me) -> absl::Status {
    for (int32_t& value : me.send.span<int32_t>()) value = static_cast<int32_t>(me.rank + 1);
    absl::Status bcast = me.comm.Bcast(me.send, 0, kCount, DataType::kInt32, 1);
    if (!bcast.ok()) return bcast;
    absl::Status sum =
        me.comm.Allreduce(me.send, me.recv, kCount, DataType::kInt32, ReduceOp::kSum);
    if (!sum.ok()) return sum;
    for (int32_t value : me.recv.span<int32_t>()) EXPECT_EQ(value, 4);  // 2 + 2
    return absl::OkStatus();
  });
  EXPECT_TRUE(results_[0].ok()) << results_[0];
  EXPECT_TRUE(results_[1].ok()) << results_[1];
}

INSTANTIATE_TEST_SUITE_P(OneDaemonAndTwo, MismatchTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "TwoDaemons" : "OneDaemon";
                         });

}  // namespace
}  // namespace cclo
