// A randomized differential test of libcclo against real cclods, with fixed seeds: worlds of
// 1, 3, 5 and 7 ranks spread unevenly over three daemons (3 + 2 ranks, 3 + 2 + 2).
//
// Collectives: two communicators over the same ranks each run their own sequence of ops side
// by side (every collective, send/recv in a ring and to the rank itself) with random
// datatypes, reductions (prod included), counts (0, 1, primes, around the eager limit and the
// segment size), roots, in-place forms and forced algorithms, several of them in flight at
// once, each checked exactly against client/run/check.h's reference (its inputs are small
// integers: sums of up to 7 ranks are exact in float16 and bfloat16, products in the
// integers, where they wrap, and in float64).
//
// Messages: more than the credits allow between every pair of ranks and to the rank itself,
// of a few tags and sizes around the eager limit, all posted async, each receive posted in a
// random order that keeps only each (source, tag)'s own: every one gets its own message.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "client/run/check.h"
#include "client/run/execute.h"
#include "firmware/registry.h"
#include "gtest/gtest.h"
#include "tests/client/sessions.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

using run::Op;

constexpr uint64_t kEagerBytes = 4096;
constexpr uint64_t kSegmentBytes = 16384;
constexpr int kSteps = 200;
constexpr int kMessagesPerRank = 60;
constexpr uint32_t kSelfTag = 5;

// One op of the sequence, the same on every rank.
struct Step {
  run::OpShape shape;     // rank and in_place are filled in per rank
  bool in_place = false;  // asked for
  std::string algorithm;
  bool self = false;  // sendrecv: to the rank itself instead of the ring
  bool wait = false;  // wait for every op in flight after submitting this one
};

std::vector<Step> Steps(uint32_t size, uint32_t seed) {
  std::mt19937 random(seed);
  auto pick = [&](auto& choices) { return choices[random() % std::size(choices)]; };
  std::vector<Step> steps;
  for (int i = 0; i < kSteps; ++i) {
    Step step;
    run::OpShape& shape = step.shape;
    shape.op = pick(run::kOps);
    shape.size = size;
    shape.datatype = pick(run::kRunDataTypes);
    const uint64_t element = hw::DataTypeSize(shape.datatype);
    const uint64_t counts[] = {0,
                               1,
                               2,
                               13,
                               101,
                               kEagerBytes / element - 1,
                               kEagerBytes / element + 1,
                               kSegmentBytes / element - 1,
                               kSegmentBytes / element + 3,
                               10007};
    shape.count = shape.op == Op::kBarrier ? 0 : pick(counts);
    shape.root = static_cast<uint32_t>(random() % size);
    hw::ReduceOp reductions[] = {hw::ReduceOp::kSum, hw::ReduceOp::kMax, hw::ReduceOp::kMin,
                                 hw::ReduceOp::kProd};
    shape.reduce_op = pick(reductions);
    // Products of the pattern's values are exact in the integers (wrapping) and float64.
    if (shape.reduce_op == hw::ReduceOp::kProd && shape.datatype >= hw::DataType::kFloat16 &&
        shape.datatype != hw::DataType::kFloat64) {
      shape.reduce_op = hw::ReduceOp::kSum;
    }
    step.in_place = hw::HasInPlace(run::CollectiveOf(shape.op)) && random() % 2 == 0;
    step.self = shape.op == Op::kSendRecv && (size == 1 || random() % 3 == 0);
    std::vector<const firmware::Algorithm*> algorithms =
        firmware::ForCollective(run::CollectiveOf(shape.op));
    const size_t choice = random() % (algorithms.size() + 1);
    if (shape.op != Op::kSendRecv && choice < algorithms.size()) {
      step.algorithm = algorithms[choice]->name;
    }
    step.wait = random() % 3 == 0;
    steps.push_back(step);
  }
  steps.back().wait = true;
  return steps;
}

// Submits `step` as this rank; the requests it made go to `requests`.
absl::Status Submit(Communicator& comm, const Step& step, const run::OpShape& shape, Buffer& send,
                    Buffer& recv, std::vector<Request>& requests) {
  const OpOptions options{.algorithm = step.algorithm, .timeout = absl::Seconds(20)};
  if (!step.self) return run::Submit(comm, shape, options, send, recv, requests);
  // A sendrecv to the rank itself (`shape` is then the ring of one the reference checks).
  absl::StatusOr<Request> received =
      comm.RecvAsync(recv, 0, shape.count, shape.datatype, comm.rank(), kSelfTag, options);
  if (!received.ok()) return received.status();
  requests.push_back(*std::move(received));
  absl::StatusOr<Request> sent =
      comm.SendAsync(send, 0, shape.count, shape.datatype, comm.rank(), kSelfTag, options);
  if (!sent.ok()) return sent.status();
  requests.push_back(*std::move(sent));
  return absl::OkStatus();
}

// An op in flight on this rank: its buffers and requests, checked once they are done.
struct InFlight {
  int index;
  run::OpShape shape;
  Buffer send;
  Buffer recv;
  std::vector<Request> requests;
};

// Runs `steps` as rank comm.rank() and checks every result.
void RunSteps(Client& client, Communicator& comm, const std::vector<Step>& steps, uint32_t seed) {
  std::vector<InFlight> in_flight;
  auto finish = [&] {
    for (InFlight& op : in_flight) {
      for (Request& request : op.requests) {
        absl::Status done = request.Wait();
        ASSERT_TRUE(done.ok()) << "step " << op.index << " on rank " << comm.rank() << ": " << done;
      }
      std::optional<run::Mismatch> mismatch =
          run::FindMismatch(op.shape, op.recv.data(), seed + op.index);
      EXPECT_FALSE(mismatch.has_value())
          << "seed " << seed << " step " << op.index << " (" << run::OpName(op.shape.op) << " of "
          << hw::DataTypeName(op.shape.datatype) << ", count " << op.shape.count << ", root "
          << op.shape.root << ", " << hw::ReduceOpName(op.shape.reduce_op) << ", in place "
          << op.shape.in_place << ") on rank " << comm.rank() << " of " << comm.size()
          << ": element " << mismatch->index << " is " << mismatch->got << ", expected "
          << mismatch->expected;
      for (Buffer* buffer : {&op.send, &op.recv}) {
        ASSERT_TRUE(client.FreeBuffer(std::move(*buffer)).ok());
      }
    }
    in_flight.clear();
  };
  for (int index = 0; index < static_cast<int>(steps.size()); ++index) {
    const Step& step = steps[index];
    InFlight op{index, step.shape};
    op.shape.rank = comm.rank();
    op.shape.in_place = run::ShapeInPlace(op.shape.op, op.shape.rank, op.shape.root, step.in_place);
    if (step.self) {  // the reference of a ring of one
      op.shape.rank = 0;
      op.shape.size = 1;
    }
    const run::BufferElements elements = run::ElementsOf(op.shape);
    const uint64_t element = hw::DataTypeSize(op.shape.datatype);
    absl::StatusOr<Buffer> send =
        client.AllocBuffer(std::max<uint64_t>(elements.send * element, 1));
    absl::StatusOr<Buffer> recv =
        client.AllocBuffer(std::max<uint64_t>(elements.recv * element, 1));
    ASSERT_TRUE(send.ok() && recv.ok()) << send.status() << " " << recv.status();
    op.send = *std::move(send);
    op.recv = *std::move(recv);
    run::FillBuffers(op.shape, seed + index, op.send.data(), op.recv.data());
    absl::Status submitted = Submit(comm, step, op.shape, op.send, op.recv, op.requests);
    ASSERT_TRUE(submitted.ok()) << "step " << index << " on rank " << comm.rank() << ": "
                                << submitted;
    in_flight.push_back(std::move(op));
    if (step.wait) finish();
  }
  finish();
}

// Parameter: the daemon of each rank (three daemons; unevenly spread).
class RandomOpsTest : public ::testing::TestWithParam<std::vector<int>> {
 protected:
  static void SetUpTestSuite() {
    for (testing::Daemon*& daemon : daemons_) {
      daemon = new testing::Daemon(
          absl::StrCat("segment_bytes: ", kSegmentBytes, "\neager_max_bytes: ", kEagerBytes, "\n"));
    }
  }
  static void TearDownTestSuite() {
    for (testing::Daemon*& daemon : daemons_) {
      delete daemon;
      daemon = nullptr;
    }
  }
  static testing::Daemon* daemons_[3];
};

testing::Daemon* RandomOpsTest::daemons_[3] = {nullptr, nullptr, nullptr};

// Two communicators over the same ranks run their own sequences side by side.
TEST_P(RandomOpsTest, EveryResultIsExact) {
  const std::vector<int>& placement = GetParam();
  const uint32_t size = static_cast<uint32_t>(placement.size());
  std::vector<std::string> runtime_dirs;
  for (int daemon : placement) runtime_dirs.push_back(daemons_[daemon]->runtime_dir());
  testing::Group groups[2] = {testing::JoinGroup(runtime_dirs), testing::JoinGroup(runtime_dirs)};
  std::vector<std::thread> threads;
  for (uint32_t g = 0; g < 2; ++g) {
    const uint32_t seed = 1000 * size + g;
    const std::vector<Step> steps = Steps(size, seed);
    for (uint32_t rank = 0; rank < size; ++rank) {
      threads.emplace_back([&groups, steps, seed, g, rank] {
        RunSteps(*groups[g].clients[rank], *groups[g].comms[rank], steps, seed);
      });
    }
  }
  for (std::thread& thread : threads) thread.join();
}

// Messages between every pair of ranks (and to the rank itself) with random sizes around
// the eager limit and a few tags, more than the credits allow in flight: each rank posts
// all its sends and receives async, the receives in a random order that keeps each
// (source, tag)'s own order, and every message lands in its own receive.
TEST_P(RandomOpsTest, MessagesMeetTheirReceivesInOrder) {
  const std::vector<int>& placement = GetParam();
  const uint32_t size = static_cast<uint32_t>(placement.size());
  std::vector<std::string> runtime_dirs;
  for (int daemon : placement) runtime_dirs.push_back(daemons_[daemon]->runtime_dir());
  testing::Group group = testing::JoinGroup(runtime_dirs);
  struct Message {
    uint32_t from, to, tag;
    uint64_t count;
  };
  const uint32_t seed = 77 + size;
  std::mt19937 random(seed);
  std::vector<Message> messages;
  const uint64_t counts[] = {0,   1, 3, kEagerBytes / 4 - 1, kEagerBytes / 4, kEagerBytes / 4 + 1,
                             5000};
  for (uint32_t i = 0; i < kMessagesPerRank * size; ++i) {
    messages.push_back({static_cast<uint32_t>(random() % size),
                        static_cast<uint32_t>(random() % size), static_cast<uint32_t>(random() % 3),
                        counts[random() % std::size(counts)]});
  }
  // Each rank's receives: its messages, shuffled, then put back in order within each
  // (source, tag).
  std::vector<std::vector<size_t>> receives(size);
  for (uint32_t rank = 0; rank < size; ++rank) {
    std::vector<size_t> mine;
    for (size_t m = 0; m < messages.size(); ++m)
      if (messages[m].to == rank) mine.push_back(m);
    std::vector<size_t> order = mine;
    std::shuffle(order.begin(), order.end(), random);
    std::map<std::pair<uint32_t, uint32_t>, std::vector<size_t>> by_key;
    for (size_t m : mine) by_key[{messages[m].from, messages[m].tag}].push_back(m);
    std::map<std::pair<uint32_t, uint32_t>, size_t> next;
    for (size_t& slot : order) {
      const std::pair<uint32_t, uint32_t> key{messages[slot].from, messages[slot].tag};
      slot = by_key[key][next[key]++];
    }
    receives[rank] = order;
  }
  std::vector<std::thread> threads;
  for (uint32_t rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      Client& client = *group.clients[rank];
      Communicator& comm = *group.comms[rank];
      std::map<size_t, Buffer> outgoing, incoming;  // by message
      std::vector<std::pair<size_t, Request>> requests;
      // A buffer for message `m` and one element past it, every element `fill`.
      auto buffer = [&](size_t m, int32_t fill) {
        absl::StatusOr<Buffer> made = client.AllocBuffer((messages[m].count + 1) * 4);
        EXPECT_TRUE(made.ok()) << made.status();
        for (int32_t& value : made->span<int32_t>()) value = fill;
        return *std::move(made);
      };
      // Sends and receives interleaved as the seed says.
      size_t next_receive = 0;
      std::mt19937 local(seed + rank);
      for (size_t m = 0; m <= messages.size(); ++m) {
        while (next_receive < receives[rank].size() && (m == messages.size() || local() % 2)) {
          const size_t r = receives[rank][next_receive++];
          incoming[r] = buffer(r, -1);
          absl::StatusOr<Request> request =
              comm.RecvAsync(incoming[r], 0, messages[r].count, DataType::kInt32, messages[r].from,
                             messages[r].tag);
          ASSERT_TRUE(request.ok()) << request.status();
          requests.emplace_back(r, *std::move(request));
        }
        if (m == messages.size() || messages[m].from != rank) continue;
        outgoing[m] = buffer(m, static_cast<int32_t>(m));
        absl::StatusOr<Request> request = comm.SendAsync(
            outgoing[m], 0, messages[m].count, DataType::kInt32, messages[m].to, messages[m].tag);
        ASSERT_TRUE(request.ok()) << request.status();
        requests.emplace_back(m, *std::move(request));
      }
      for (auto& [m, request] : requests) {
        absl::Status done = request.Wait();
        ASSERT_TRUE(done.ok()) << "message " << m << " on rank " << rank << ": " << done;
      }
      for (size_t r : receives[rank]) {
        std::span<int32_t> got = incoming[r].span<int32_t>();
        for (uint64_t i = 0; i < messages[r].count; ++i) {
          ASSERT_EQ(got[i], static_cast<int32_t>(r)) << "message " << r << " element " << i;
        }
        EXPECT_EQ(got[messages[r].count], -1) << "message " << r;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

INSTANTIATE_TEST_SUITE_P(Worlds, RandomOpsTest,
                         ::testing::Values(std::vector<int>{0}, std::vector<int>{1, 1, 0},
                                           std::vector<int>{0, 1, 0, 1, 0},
                                           std::vector<int>{0, 1, 0, 2, 0, 1, 2}),
                         [](const auto& info) { return absl::StrCat("Size", info.param.size()); });

}  // namespace
}  // namespace cclo
