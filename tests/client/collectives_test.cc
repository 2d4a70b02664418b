// libcclo's collectives against real cclods: three ranks on two daemons (ranks 0 and 2 share
// one), every collective blocking, async and in place, with int32 inputs where element i of
// rank r is 1000 * r + i, checked exactly.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "gtest/gtest.h"
#include "tests/client/sessions.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

constexpr uint32_t kSize = 3;
constexpr uint64_t kCount = 5;  // elements per rank and chunk
constexpr DataType kInt32 = DataType::kInt32;

int32_t Value(uint32_t rank, uint64_t index) { return static_cast<int32_t>(1000 * rank + index); }

// One rank of the group as its thread sees it.
struct Rank {
  uint32_t rank;
  Client& client;
  Communicator& comm;

  // A buffer of `elements` int32 elements, all -1.
  Buffer Alloc(uint64_t elements) {
    absl::StatusOr<Buffer> buffer = client.AllocBuffer(elements * sizeof(int32_t));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return Buffer();
    for (int32_t& value : buffer->span<int32_t>()) value = -1;
    return *std::move(buffer);
  }
};

std::span<int32_t> Ints(Buffer& buffer) { return buffer.span<int32_t>(); }

// Writes this rank's values Value(owner, first + i) to `count` elements at `at`.
void Fill(std::span<int32_t> at, uint32_t owner, uint64_t first, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) at[i] = Value(owner, first + i);
}

// Blocking or async: runs `submit` and waits for the op either way.
absl::Status RunOp(bool async, const std::function<absl::Status()>& blocking,
                   const std::function<absl::StatusOr<Request>()>& submit) {
  if (!async) return blocking();
  absl::StatusOr<Request> request = submit();
  if (!request.ok()) return request.status();
  return request->Wait();
}

class CollectivesTest : public ::testing::TestWithParam<bool> {
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

  bool async() const { return GetParam(); }

  // Joins kSize ranks (rank r on daemon r % 2), runs `body` for each in its own thread and
  // keeps every session until all are done (a session that ends breaks the communicator).
  static void ForEachRank(const std::function<void(Rank&)>& body) {
    std::vector<std::string> runtime_dirs;
    for (uint32_t rank = 0; rank < kSize; ++rank) {
      runtime_dirs.push_back(daemons_[rank % 2]->runtime_dir());
    }
    testing::Group group = testing::JoinGroup(runtime_dirs);
    std::vector<std::thread> threads;
    for (uint32_t rank = 0; rank < kSize; ++rank) {
      threads.emplace_back([&, rank] {
        Rank me{rank, *group.clients[rank], *group.comms[rank]};
        body(me);
      });
    }
    for (std::thread& thread : threads) thread.join();
  }

  static testing::Daemon* daemons_[2];
};

testing::Daemon* CollectivesTest::daemons_[2] = {nullptr, nullptr};

TEST_P(CollectivesTest, Scatter) {
  const uint32_t root = 1;
  ForEachRank([&](Rank& me) {
    Buffer send = me.Alloc(kSize * kCount);
    Buffer recv = me.Alloc(kSize * kCount);
    if (me.rank == root) Fill(Ints(send), root, 0, kSize * kCount);
    ASSERT_TRUE(RunOp(
                    async(), [&] { return me.comm.Scatter(send, recv, kCount, kInt32, root); },
                    [&] { return me.comm.ScatterAsync(send, recv, kCount, kInt32, root); })
                    .ok());
    for (uint64_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(Ints(recv)[i], Value(root, me.rank * kCount + i)) << me.rank << " " << i;
    }
    // In place: the root's chunks are in recv, and its own chunk stays.
    Buffer in_place = me.Alloc(kSize * kCount);
    if (me.rank == root) Fill(Ints(in_place), root, 0, kSize * kCount);
    OpOptions options{.in_place = true};
    ASSERT_TRUE(
        RunOp(
            async(), [&] { return me.comm.Scatter(send, in_place, kCount, kInt32, root, options); },
            [&] { return me.comm.ScatterAsync(send, in_place, kCount, kInt32, root, options); })
            .ok());
    for (uint64_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(Ints(in_place)[i + (me.rank == root ? root * kCount : 0)],
                Value(root, me.rank * kCount + i));
    }
  });
}

TEST_P(CollectivesTest, Gather) {
  const uint32_t root = 2;
  ForEachRank([&](Rank& me) {
    Buffer send = me.Alloc(kCount);
    Buffer recv = me.Alloc(kSize * kCount);
    Fill(Ints(send), me.rank, 0, kCount);
    ASSERT_TRUE(RunOp(
                    async(), [&] { return me.comm.Gather(send, recv, kCount, kInt32, root); },
                    [&] { return me.comm.GatherAsync(send, recv, kCount, kInt32, root); })
                    .ok());
    // In place: the root's contribution already sits at chunk `root`.
    Buffer in_place = me.Alloc(kSize * kCount);
    if (me.rank == root) Fill(Ints(in_place).subspan(root * kCount), root, 0, kCount);
    OpOptions options{.in_place = true};
    ASSERT_TRUE(
        RunOp(
            async(), [&] { return me.comm.Gather(send, in_place, kCount, kInt32, root, options); },
            [&] { return me.comm.GatherAsync(send, in_place, kCount, kInt32, root, options); })
            .ok());
    for (Buffer* out : {&recv, &in_place}) {
      for (uint64_t j = 0; j < kSize * kCount; ++j) {
        // Only the root receives; elsewhere the buffer is untouched.
        const int32_t expected = me.rank == root ? Value(j / kCount, j % kCount) : -1;
        EXPECT_EQ(Ints(*out)[j], expected) << me.rank << " " << j;
      }
    }
  });
}

TEST_P(CollectivesTest, Allgather) {
  ForEachRank([&](Rank& me) {
    Buffer send = me.Alloc(kCount);
    Buffer recv = me.Alloc(kSize * kCount);
    Fill(Ints(send), me.rank, 0, kCount);
    ASSERT_TRUE(RunOp(
                    async(), [&] { return me.comm.Allgather(send, recv, kCount, kInt32); },
                    [&] { return me.comm.AllgatherAsync(send, recv, kCount, kInt32); })
                    .ok());
    Buffer in_place = me.Alloc(kSize * kCount);
    Fill(Ints(in_place).subspan(me.rank * kCount), me.rank, 0, kCount);
    OpOptions options{.in_place = true};
    ASSERT_TRUE(RunOp(
                    async(),
                    [&] { return me.comm.Allgather(send, in_place, kCount, kInt32, options); },
                    [&] { return me.comm.AllgatherAsync(send, in_place, kCount, kInt32, options); })
                    .ok());
    for (Buffer* out : {&recv, &in_place}) {
      for (uint64_t j = 0; j < kSize * kCount; ++j) {
        EXPECT_EQ(Ints(*out)[j], Value(j / kCount, j % kCount)) << me.rank << " " << j;
      }
    }
  });
}

// The sum over ranks of Value(rank, index).
int32_t Sum(uint64_t index) {
  int32_t sum = 0;
  for (uint32_t rank = 0; rank < kSize; ++rank) sum += Value(rank, index);
  return sum;
}

TEST_P(CollectivesTest, Reduce) {
  const uint32_t root = 0;
  ForEachRank([&](Rank& me) {
    Buffer send = me.Alloc(kCount);
    Buffer recv = me.Alloc(kCount);
    Fill(Ints(send), me.rank, 0, kCount);
    ASSERT_TRUE(
        RunOp(
            async(),
            [&] { return me.comm.Reduce(send, recv, kCount, kInt32, ReduceOp::kSum, root); },
            [&] { return me.comm.ReduceAsync(send, recv, kCount, kInt32, ReduceOp::kSum, root); })
            .ok());
    Buffer in_place = me.Alloc(kCount);
    if (me.rank == root) Fill(Ints(in_place), root, 0, kCount);
    OpOptions options{.in_place = true};
    ASSERT_TRUE(RunOp(
                    async(),
                    [&] {
                      return me.comm.Reduce(send, in_place, kCount, kInt32, ReduceOp::kMax, root,
                                            options);
                    },
                    [&] {
                      return me.comm.ReduceAsync(send, in_place, kCount, kInt32, ReduceOp::kMax,
                                                 root, options);
                    })
                    .ok());
    for (uint64_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(Ints(recv)[i], me.rank == root ? Sum(i) : -1);
      EXPECT_EQ(Ints(in_place)[i], me.rank == root ? Value(kSize - 1, i) : -1);
    }
  });
}

TEST_P(CollectivesTest, Allreduce) {
  ForEachRank([&](Rank& me) {
    Buffer send = me.Alloc(kCount);
    Buffer recv = me.Alloc(kCount);
    Fill(Ints(send), me.rank, 0, kCount);
    ASSERT_TRUE(
        RunOp(
            async(), [&] { return me.comm.Allreduce(send, recv, kCount, kInt32, ReduceOp::kSum); },
            [&] { return me.comm.AllreduceAsync(send, recv, kCount, kInt32, ReduceOp::kSum); })
            .ok());
    Buffer in_place = me.Alloc(kCount);
    Fill(Ints(in_place), me.rank, 0, kCount);
    OpOptions options{.in_place = true};
    ASSERT_TRUE(RunOp(
                    async(),
                    [&] {
                      return me.comm.Allreduce(send, in_place, kCount, kInt32, ReduceOp::kMin,
                                               options);
                    },
                    [&] {
                      return me.comm.AllreduceAsync(send, in_place, kCount, kInt32, ReduceOp::kMin,
                                                    options);
                    })
                    .ok());
    for (uint64_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(Ints(recv)[i], Sum(i));
      EXPECT_EQ(Ints(in_place)[i], Value(0, i));
    }
  });
}

TEST_P(CollectivesTest, ReduceScatter) {
  ForEachRank([&](Rank& me) {
    Buffer send = me.Alloc(kSize * kCount);
    Buffer recv = me.Alloc(kCount);
    Fill(Ints(send), me.rank, 0, kSize * kCount);
    ASSERT_TRUE(
        RunOp(
            async(),
            [&] { return me.comm.ReduceScatter(send, recv, kCount, kInt32, ReduceOp::kSum); },
            [&] { return me.comm.ReduceScatterAsync(send, recv, kCount, kInt32, ReduceOp::kSum); })
            .ok());
    // In place: recv holds the whole input; the result lands in its first kCount elements.
    Buffer in_place = me.Alloc(kSize * kCount);
    Fill(Ints(in_place), me.rank, 0, kSize * kCount);
    OpOptions options{.in_place = true};
    ASSERT_TRUE(RunOp(
                    async(),
                    [&] {
                      return me.comm.ReduceScatter(send, in_place, kCount, kInt32, ReduceOp::kSum,
                                                   options);
                    },
                    [&] {
                      return me.comm.ReduceScatterAsync(send, in_place, kCount, kInt32,
                                                        ReduceOp::kSum, options);
                    })
                    .ok());
    for (uint64_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(Ints(recv)[i], Sum(me.rank * kCount + i)) << me.rank << " " << i;
      EXPECT_EQ(Ints(in_place)[i], Sum(me.rank * kCount + i)) << me.rank << " " << i;
    }
  });
}

TEST_P(CollectivesTest, Alltoall) {
  ForEachRank([&](Rank& me) {
    Buffer send = me.Alloc(kSize * kCount);
    Buffer recv = me.Alloc(kSize * kCount);
    Fill(Ints(send), me.rank, 0, kSize * kCount);
    ASSERT_TRUE(RunOp(
                    async(), [&] { return me.comm.Alltoall(send, recv, kCount, kInt32); },
                    [&] { return me.comm.AlltoallAsync(send, recv, kCount, kInt32); })
                    .ok());
    Buffer in_place = me.Alloc(kSize * kCount);
    Fill(Ints(in_place), me.rank, 0, kSize * kCount);
    OpOptions options{.in_place = true};
    ASSERT_TRUE(RunOp(
                    async(),
                    [&] { return me.comm.Alltoall(send, in_place, kCount, kInt32, options); },
                    [&] { return me.comm.AlltoallAsync(send, in_place, kCount, kInt32, options); })
                    .ok());
    // Chunk s of rank r's output is chunk r of rank s's input.
    for (Buffer* out : {&recv, &in_place}) {
      for (uint64_t j = 0; j < kSize * kCount; ++j) {
        EXPECT_EQ(Ints(*out)[j], Value(j / kCount, me.rank * kCount + j % kCount))
            << me.rank << " " << j;
      }
    }
  });
}

TEST_P(CollectivesTest, Barrier) {
  ForEachRank([&](Rank& me) {
    EXPECT_TRUE(
        RunOp(
            async(), [&] { return me.comm.Barrier(); }, [&] { return me.comm.BarrierAsync(); })
            .ok());
  });
}

// Every rank posts its receive before its send: sends and receives of a rank run side by
// side, as MPI's nonblocking ones do, so the ring does not wait on itself. The second
// round exchanges in the other direction, blocking on the send after an async receive.
TEST_P(CollectivesTest, RingOfReceivesPostedBeforeSends) {
  ForEachRank([&](Rank& me) {
    const uint32_t next = (me.rank + 1) % kSize, previous = (me.rank + kSize - 1) % kSize;
    for (const auto& [to, from] : {std::pair{next, previous}, std::pair{previous, next}}) {
      Buffer out = me.Alloc(kCount), in = me.Alloc(kCount);
      Fill(Ints(out), me.rank, 0, kCount);
      absl::StatusOr<Request> receive = me.comm.RecvAsync(in, 0, kCount, kInt32, from, 9);
      ASSERT_TRUE(receive.ok()) << receive.status();
      absl::Status sent = RunOp(
          async(), [&] { return me.comm.Send(out, 0, kCount, kInt32, to, 9); },
          [&] { return me.comm.SendAsync(out, 0, kCount, kInt32, to, 9); });
      EXPECT_TRUE(sent.ok()) << "rank " << me.rank << ": " << sent;
      EXPECT_TRUE(receive->Wait().ok());
      for (uint64_t i = 0; i < kCount; ++i) EXPECT_EQ(Ints(in)[i], Value(from, i)) << i;
    }
  });
}

TEST_P(CollectivesTest, BuffersTooSmallForTheContractAreRefusedHere) {
  ForEachRank([&](Rank& me) {
    Buffer small = me.Alloc(kCount);
    Buffer big = me.Alloc(kSize * kCount);
    absl::Status status = me.comm.Allgather(small, small, kCount, kInt32);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(status.message(),
              absl::StrCat("allgather recv: range of 60 bytes at offset 0 exceeds buffer ",
                           small.id(), " of 20 bytes"));
    status = me.comm.Alltoall(small, big, kCount, kInt32);
    EXPECT_EQ(status.message(),
              absl::StrCat("alltoall send: range of 60 bytes at offset 0 exceeds buffer ",
                           small.id(), " of 20 bytes"));
    // A count whose size() chunks pass 2^64 bytes, though one chunk does not, is named.
    status = me.comm.Alltoall(small, big, uint64_t{1} << 62, kInt32);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(),
              "alltoall send: count 4611686018427387904 of int32 times 3 ranks overflows a byte "
              "length");
    status = me.comm.ReduceScatter(small, big, uint64_t{1} << 63, DataType::kInt8, ReduceOp::kSum,
                                   {.in_place = true});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(),
              "reduce_scatter recv: count 9223372036854775808 of int8 times 3 ranks overflows a "
              "byte length");
    // Away from the root, scatter reads no send buffer: a small one is fine.
    absl::StatusOr<Request> scatter =
        me.comm.ScatterAsync(me.rank == 0 ? big : small, small, kCount, kInt32, 0);
    ASSERT_TRUE(scatter.ok()) << scatter.status();
    EXPECT_TRUE(scatter->Wait().ok());
    // Bcast has no in-place form.
    status = me.comm.Bcast(small, 0, kCount, kInt32, 0, {.in_place = true});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "Submit: bcast has no in-place variant");
  });
}

INSTANTIATE_TEST_SUITE_P(BlockingAndAsync, CollectivesTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Async" : "Blocking"; });

}  // namespace
}  // namespace cclo
