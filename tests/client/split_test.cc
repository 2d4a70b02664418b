// Client::Split against real cclods: six ranks on two daemons split by parity, the new
// communicators run collectives, a negative color gets none, and the split's steps share
// its timeout.
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "cclo/client.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

constexpr uint32_t kSize = 6;

class SplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string token = *Attach(0)->CreateCommunicatorId();
    for (uint32_t rank = 0; rank < kSize; ++rank) clients_.push_back(Attach(rank % 2));
    std::vector<std::thread> threads;
    parents_.resize(kSize);
    for (uint32_t rank = 0; rank < kSize; ++rank) {
      threads.emplace_back([&, rank] {
        absl::StatusOr<std::unique_ptr<Communicator>> comm =
            clients_[rank]->Join(token, rank, kSize, absl::Seconds(30));
        ASSERT_TRUE(comm.ok()) << comm.status();
        parents_[rank] = *std::move(comm);
      });
    }
    for (std::thread& thread : threads) thread.join();
  }

  std::unique_ptr<Client> Attach(uint32_t daemon) {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemons_[daemon].runtime_dir());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Every rank splits with color_of(rank) and key_of(rank); returns the new communicators.
  std::vector<std::unique_ptr<Communicator>> SplitAll(int32_t (*color_of)(uint32_t),
                                                      int32_t (*key_of)(uint32_t)) {
    std::vector<std::unique_ptr<Communicator>> split(kSize);
    std::vector<std::thread> threads;
    for (uint32_t rank = 0; rank < kSize; ++rank) {
      threads.emplace_back([&, rank] {
        absl::StatusOr<std::unique_ptr<Communicator>> comm = clients_[rank]->Split(
            *parents_[rank], color_of(rank), key_of(rank), absl::Seconds(30));
        ASSERT_TRUE(comm.ok()) << "rank " << rank << ": " << comm.status();
        split[rank] = *std::move(comm);
      });
    }
    for (std::thread& thread : threads) thread.join();
    return split;
  }

  testing::Daemon daemons_[2];
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::unique_ptr<Communicator>> parents_;
};

TEST_F(SplitTest, ByParityOrderedByDescendingKey) {
  // Even ranks form one communicator, odd ranks another; key -rank reverses the order.
  auto split = SplitAll([](uint32_t rank) { return static_cast<int32_t>(rank % 2); },
                        [](uint32_t rank) { return -static_cast<int32_t>(rank); });
  for (uint32_t rank = 0; rank < kSize; ++rank) {
    ASSERT_NE(split[rank], nullptr);
    EXPECT_EQ(split[rank]->size(), 3u);
    EXPECT_EQ(split[rank]->rank(), 2 - rank / 2) << "parent rank " << rank;
  }
  EXPECT_EQ(split[0]->id_hex(), split[4]->id_hex());
  EXPECT_NE(split[0]->id_hex(), split[1]->id_hex());

  // Each new communicator reduces its members' parent ranks: 0+2+4 and 1+3+5.
  std::vector<std::thread> threads;
  std::vector<int64_t> sums(kSize, -1);
  for (uint32_t rank = 0; rank < kSize; ++rank) {
    threads.emplace_back([&, rank] {
      absl::StatusOr<Buffer> buffer = clients_[rank]->AllocBuffer(sizeof(int64_t));
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      buffer->span<int64_t>()[0] = rank;
      const absl::Status status = split[rank]->Allreduce(*buffer, *buffer, 1, DataType::kInt64,
                                                         ReduceOp::kSum, {.in_place = true});
      ASSERT_TRUE(status.ok()) << status;
      sums[rank] = buffer->span<int64_t>()[0];
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (uint32_t rank = 0; rank < kSize; ++rank) EXPECT_EQ(sums[rank], rank % 2 == 0 ? 6 : 9);
}

TEST_F(SplitTest, NegativeColorGetsNoCommunicator) {
  // Ranks 0 and 1 opt out; 2..5 form one communicator in parent order.
  auto split = SplitAll([](uint32_t rank) { return rank < 2 ? -1 : 7; },
                        [](uint32_t) { return 0; });
  EXPECT_EQ(split[0], nullptr);
  EXPECT_EQ(split[1], nullptr);
  for (uint32_t rank = 2; rank < kSize; ++rank) {
    ASSERT_NE(split[rank], nullptr);
    EXPECT_EQ(split[rank]->size(), 4u);
    EXPECT_EQ(split[rank]->rank(), rank - 2);
  }
  // The parent still works after the split.
  std::vector<std::thread> threads;
  for (uint32_t rank = 0; rank < kSize; ++rank) {
    threads.emplace_back([&, rank] { EXPECT_TRUE(parents_[rank]->Barrier().ok()); });
  }
  for (std::thread& thread : threads) thread.join();
}

TEST_F(SplitTest, TheWholeSplitEndsByItsTimeout) {
  // Rank 5 takes part in the first exchange late and never in the second: the other
  // ranks' second exchange gets only what is left of the split's timeout.
  constexpr absl::Duration kTimeout = absl::Seconds(4);
  std::thread late([&] {
    absl::StatusOr<Buffer> scratch = clients_[5]->AllocBuffer(kSize * 2 * sizeof(int64_t));
    ASSERT_TRUE(scratch.ok()) << scratch.status();
    absl::SleepFor(absl::Seconds(3));
    EXPECT_TRUE(
        parents_[5]->Allgather(*scratch, *scratch, 2, DataType::kInt64, {.in_place = true}).ok());
  });
  std::vector<std::thread> threads;
  for (uint32_t rank = 0; rank < kSize - 1; ++rank) {
    threads.emplace_back([&, rank] {
      const absl::Time start = absl::Now();
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          clients_[rank]->Split(*parents_[rank], 0, 0, kTimeout);
      const absl::Duration took = absl::Now() - start;
      // The first rank whose exchange expires breaks the parent for the others.
      const bool expired = comm.status().code() == absl::StatusCode::kDeadlineExceeded ||
                           (comm.status().code() == absl::StatusCode::kUnavailable &&
                            absl::StrContains(comm.status().message(), "missed its deadline"));
      EXPECT_TRUE(expired) << "rank " << rank << ": " << comm.status();
      // Each step with the whole timeout would take 3 s + 4 s.
      EXPECT_LT(took, kTimeout + absl::Milliseconds(1500)) << "rank " << rank;
    });
  }
  for (std::thread& thread : threads) thread.join();
  late.join();
  const absl::StatusOr<std::unique_ptr<Communicator>> negative =
      clients_[0]->Split(*parents_[0], 0, 0, absl::Seconds(-1));
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.status().message(), "split timeout -1s is negative");
}

}  // namespace
}  // namespace cclo
