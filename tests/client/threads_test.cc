// libcclo used as MPI_THREAD_MULTIPLE programs use it, against a real cclod: several threads
// on one Request, Requests outliving their Communicator or Client, a forked child, and
// signals arriving during waits.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cclo/client.h"
#include "gtest/gtest.h"
#include "tests/client/sessions.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

using testing::AttachOrDie;
using testing::JoinAlone;
using testing::JoinPair;
using testing::Pair;

// Progress threads waiting on one request (two by Wait, one by Test): each learns the op's
// result. (A waiter that lost the race for the completion used to wait for the op's
// deadline plus a grace, here an hour: the test timed out.)
TEST(ThreadsTest, SeveralThreadsWaitOnOneRequest) {
  testing::Daemon daemon;
  Pair pair = JoinPair(daemon.runtime_dir());
  absl::StatusOr<Buffer> in = pair.clients[0]->AllocBuffer(16);
  absl::StatusOr<Buffer> out = pair.clients[1]->AllocBuffer(16);
  ASSERT_TRUE(in.ok() && out.ok());
  for (int round = 0; round < 5; ++round) {
    absl::StatusOr<Request> receive = pair.comms[0]->RecvAsync(*in, 0, 4, DataType::kInt32, 1,
                                                               round, {.timeout = absl::Hours(1)});
    ASSERT_TRUE(receive.ok()) << receive.status();
    std::atomic<int> started = 0;
    std::vector<absl::Status> waited(3);
    std::vector<std::thread> waiters;
    for (int i = 0; i < 2; ++i) {
      waiters.emplace_back([&, i] {
        ++started;
        waited[i] = receive->Wait();
      });
    }
    waiters.emplace_back([&] {
      ++started;
      absl::StatusOr<bool> done = false;
      while (done.ok() && !*done) done = receive->Test();
      waited[2] = done.status();
    });
    while (started.load() < 3) std::this_thread::yield();
    out->span<int32_t>()[0] = round;
    ASSERT_TRUE(pair.comms[1]->Send(*out, 0, 4, DataType::kInt32, 0, round).ok());
    for (std::thread& waiter : waiters) waiter.join();
    for (const absl::Status& status : waited) {
      EXPECT_TRUE(status.ok()) << "round " << round << ": " << status;
    }
    EXPECT_TRUE(receive->done());
    EXPECT_EQ(receive->algorithm(), "direct");
    EXPECT_EQ(in->span<int32_t>()[0], round);
  }
}

}  // namespace
}  // namespace cclo
