// Allreduce, reduce_scatter, alltoall and reduce with one buffer as both send and recv, two
// ranks on two daemons: the daemon runs them as their in-place form, so every algorithm is
// right however the ranks' messages meet their receives (a reduce applied as the peer's
// message arrives must not write the input before it has been sent). Refusals of other
// overlaps: tests/e2e:bad_input_test.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

constexpr uint32_t kRanks = 2;
constexpr int kRounds = 20;  // the race an alias could lose runs differently every time

float Value(uint32_t rank, uint64_t index, int round) {
  return static_cast<float>((rank * 7 + index * 3 + round) % 50);
}

// Writes rank `rank`'s input of `round` to the first `elements` floats of `buffer`.
std::span<float> Fill(Buffer& buffer, uint32_t rank, uint64_t elements, int round) {
  std::span<float> values = buffer.span<float>();
  for (uint64_t i = 0; i < elements; ++i) values[i] = Value(rank, i, round);
  return values;
}

class SameBufferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto& daemon : daemons_) daemon = std::make_unique<testing::Daemon>();
    for (uint32_t rank = 0; rank < kRanks; ++rank) {
      absl::StatusOr<std::unique_ptr<Client>> client =
          Client::Attach(daemons_[rank]->runtime_dir());
      ASSERT_TRUE(client.ok()) << client.status();
      clients_.push_back(*std::move(client));
    }
  }

  // Runs `body(rank, comm)` on both ranks of a new communicator, each in its own thread.
  void ForBothRanks(const std::function<void(uint32_t, Communicator&)>& body) {
    absl::StatusOr<std::string> token = clients_[0]->CreateCommunicatorId();
    ASSERT_TRUE(token.ok()) << token.status();
    std::vector<std::thread> threads;
    for (uint32_t rank = 0; rank < kRanks; ++rank) {
      threads.emplace_back([&, rank] {
        absl::StatusOr<std::unique_ptr<Communicator>> comm =
            clients_[rank]->Join(*token, rank, kRanks);
        ASSERT_TRUE(comm.ok()) << comm.status();
        body(rank, **comm);
        EXPECT_TRUE((*comm)->Destroy().ok());
      });
    }
    for (std::thread& thread : threads) thread.join();
  }

  Buffer Alloc(uint32_t rank, uint64_t floats) {
    absl::StatusOr<Buffer> buffer = clients_[rank]->AllocBuffer(floats * sizeof(float));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return buffer.ok() ? *std::move(buffer) : Buffer();
  }

  std::unique_ptr<testing::Daemon> daemons_[kRanks];
  std::vector<std::unique_ptr<Client>> clients_;
};

TEST_F(SameBufferTest, AllreduceOfEveryAlgorithmAndProtocolIsRight) {
  // 16 floats (eager) and 256 Ki floats (1 MiB, rendezvous), every algorithm.
  for (uint64_t count : {uint64_t{16}, uint64_t{256} << 10}) {
    for (const char* algorithm : {"recursive_doubling", "ring", "reduce_bcast"}) {
      ForBothRanks([&](uint32_t rank, Communicator& comm) {
        Buffer both = Alloc(rank, count);
        for (int round = 0; round < kRounds; ++round) {
          std::span<float> values = Fill(both, rank, count, round);
          absl::Status status = comm.Allreduce(both, both, count, DataType::kFloat32,
                                               ReduceOp::kSum, {.algorithm = algorithm});
          ASSERT_TRUE(status.ok()) << algorithm << ": " << status;
          for (uint64_t i = 0; i < count; ++i) {
            ASSERT_EQ(values[i], Value(0, i, round) + Value(1, i, round))
                << algorithm << ", " << count << " floats, rank " << rank << ", round " << round
                << ", [" << i << "]";
          }
        }
      });
    }
  }
}

TEST_F(SameBufferTest, ReduceScatterIsRight) {
  for (uint64_t count : {uint64_t{16}, uint64_t{256} << 10}) {
    ForBothRanks([&](uint32_t rank, Communicator& comm) {
      Buffer both = Alloc(rank, kRanks * count);
      for (int round = 0; round < kRounds; ++round) {
        std::span<float> values = Fill(both, rank, kRanks * count, round);
        absl::Status status =
            comm.ReduceScatter(both, both, count, DataType::kFloat32, ReduceOp::kSum);
        ASSERT_TRUE(status.ok()) << status;
        for (uint64_t i = 0; i < count; ++i) {
          const uint64_t at = rank * count + i;
          ASSERT_EQ(values[i], Value(0, at, round) + Value(1, at, round))
              << count << " floats, rank " << rank << ", round " << round << ", [" << i << "]";
        }
      }
    });
  }
}

TEST_F(SameBufferTest, AlltoallAndReduceAtTheRootAreRight) {
  for (uint64_t count : {uint64_t{16}, uint64_t{256} << 10}) {
    ForBothRanks([&](uint32_t rank, Communicator& comm) {
      Buffer both = Alloc(rank, kRanks * count);
      for (int round = 0; round < kRounds; ++round) {
        std::span<float> values = Fill(both, rank, kRanks * count, round);
        absl::Status status = comm.Alltoall(both, both, count, DataType::kFloat32);
        ASSERT_TRUE(status.ok()) << status;
        for (uint32_t from = 0; from < kRanks; ++from) {
          for (uint64_t i = 0; i < count; ++i) {
            ASSERT_EQ(values[from * count + i], Value(from, rank * count + i, round))
                << "alltoall, " << count << " floats, rank " << rank << ", round " << round;
          }
        }
        // Reduce to rank 0, one buffer at the root; rank 1's recv is not read.
        Fill(both, rank, count, round);
        status = comm.Reduce(both, both, count, DataType::kFloat32, ReduceOp::kSum, 0);
        ASSERT_TRUE(status.ok()) << status;
        for (uint64_t i = 0; rank == 0 && i < count; ++i) {
          ASSERT_EQ(values[i], Value(0, i, round) + Value(1, i, round))
              << "reduce, " << count << " floats, round " << round << ", [" << i << "]";
        }
      }
    });
  }
}

}  // namespace
}  // namespace cclo
