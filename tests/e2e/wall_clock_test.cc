// A step of the wall clock (an NTP step, `date -s`) while ops wait changes none of their
// deadlines: daemons, and in one case the client, run under wall_clock_shim.cc, which steps
// their CLOCK_REALTIME by an offset this test sets, one hour forward or back.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "cclo/client.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

/// The offset the shim adds to the wall clock of the processes started through Launcher().
class WallClockOffset {
 public:
  WallClockOffset() {
    char path[] = "/tmp/cclo-wall.XXXXXX";
    const int fd = mkstemp(path);
    path_ = path;
    if (fd < 0 || ftruncate(fd, sizeof(int64_t)) != 0) std::abort();
    void* mapped = mmap(nullptr, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (mapped == MAP_FAILED) std::abort();
    offset_ns_ = static_cast<int64_t*>(mapped);
  }
  ~WallClockOffset() {
    munmap(offset_ns_, sizeof(int64_t));
    unlink(path_.c_str());
  }

  /// Steps the wall clock of those processes by `by` (forward if positive).
  void Step(absl::Duration by) {
    __atomic_add_fetch(offset_ns_, absl::ToInt64Nanoseconds(by), __ATOMIC_SEQ_CST);
  }

  /// Runs a program under the shim with this offset.
  std::vector<std::string> Launcher() const {
    return {"/usr/bin/env", "LD_PRELOAD=" + Runfile("tests/e2e/libwall_clock_shim.so"),
            "CCLO_TEST_WALL_OFFSET_FILE=" + path_};
  }

 private:
  std::string path_;
  int64_t* offset_ns_ = nullptr;
};

constexpr absl::Duration kHour = absl::Hours(1);
constexpr uint64_t kCount = 256;
constexpr uint32_t kTag = 7;

struct Rank {
  std::unique_ptr<Client> client;
  std::unique_ptr<Communicator> comm;
  Buffer buffer;
};

/// Rank 0 at `a` and rank 1 at `b` of a new communicator, each with a buffer of kCount
/// floats, rank 0's holding i + 0.5 at element i.
std::pair<Rank, Rank> JoinTwo(const Daemon& a, const Daemon& b) {
  Rank ranks[2];
  ranks[0].client = *Client::Attach(a.runtime_dir());
  ranks[1].client = *Client::Attach(b.runtime_dir());
  const std::string token = *ranks[0].client->CreateCommunicatorId();
  std::thread second(
      [&] { ranks[1].comm = *ranks[1].client->Join(token, 1, 2, absl::Seconds(30)); });
  ranks[0].comm = *ranks[0].client->Join(token, 0, 2, absl::Seconds(30));
  second.join();
  for (Rank& rank : ranks) rank.buffer = *rank.client->AllocBuffer(kCount * sizeof(float));
  std::span<float> data = ranks[0].buffer.span<float>();
  for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(i) + 0.5f;
  return {std::move(ranks[0]), std::move(ranks[1])};
}

OpOptions Timeout(absl::Duration timeout) {
  OpOptions options;
  options.timeout = timeout;
  return options;
}

/// Posts rank 1's receive of rank 0's buffer (tag kTag, timeout `timeout`).
absl::StatusOr<Request> PostRecv(Rank& to, absl::Duration timeout) {
  return to.comm->RecvAsync(to.buffer, 0, kCount, DataType::kFloat32, 0, kTag, Timeout(timeout));
}

/// Sends rank 0's buffer to rank 1, whose receive `recv` must get it whole.
void ExpectSent(Rank& from, Rank& to, Request& recv) {
  absl::Status sent = from.comm->Send(from.buffer, 0, kCount, DataType::kFloat32, 1, kTag,
                                      Timeout(absl::Seconds(20)));
  EXPECT_TRUE(sent.ok()) << sent;
  absl::Status received = recv.Wait();
  ASSERT_TRUE(received.ok()) << received;
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(to.buffer.span<float>()[i], static_cast<float>(i) + 0.5f) << "element " << i;
  }
}

/// A receive posted, then the matching send: rank 1 gets rank 0's buffer.
void ExpectSendRecv(Rank& from, Rank& to) {
  absl::StatusOr<Request> recv = PostRecv(to, absl::Seconds(20));
  ASSERT_TRUE(recv.ok()) << recv.status();
  ExpectSent(from, to, *recv);
}

TEST(WallClockTest, StepForwardLeavesAWaitingReceiveToItsDeadline) {
  WallClockOffset wall;
  Daemon a("", wall.Launcher()), b("", wall.Launcher());
  auto [rank0, rank1] = JoinTwo(a, b);
  absl::StatusOr<Request> recv = PostRecv(rank1, absl::Seconds(20));
  ASSERT_TRUE(recv.ok()) << recv.status();

  wall.Step(kHour);
  // Both daemons have turned since the step: another communicator forms and moves data
  // through both engines.
  {
    auto [other0, other1] = JoinTwo(a, b);
    ExpectSendRecv(other0, other1);
  }
  ExpectSent(rank0, rank1, *recv);
}

TEST(WallClockTest, StepBackLetsAnOpExpireAtItsDeadline) {
  WallClockOffset wall;
  Daemon a("", wall.Launcher()), b("", wall.Launcher());
  auto [rank0, rank1] = JoinTwo(a, b);
  // Rank 0 never sends.
  absl::StatusOr<Request> recv = PostRecv(rank1, absl::Seconds(2));
  ASSERT_TRUE(recv.ok()) << recv.status();
  wall.Step(-kHour);

  // The daemon ends it at its deadline: not the client giving up 10 s past it, unreported.
  const auto start = std::chrono::steady_clock::now();
  absl::Status expired = recv->Wait(absl::Seconds(60));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(expired.code(), absl::StatusCode::kDeadlineExceeded) << expired;
  EXPECT_TRUE(absl::EndsWith(expired.message(), "nothing arrived")) << expired;
  EXPECT_LT(waited, std::chrono::seconds(30));

  // Ops still complete with the wall clock an hour back.
  auto [other0, other1] = JoinTwo(a, b);
  ExpectSendRecv(other0, other1);
}

TEST(WallClockTest, ClientStepForwardLeavesItsWaitToTheDaemon) {
  WallClockOffset wall;
  Daemon a, b;
  Rank rank0;
  rank0.client = *Client::Attach(a.runtime_dir());
  const std::string token = *rank0.client->CreateCommunicatorId();
  std::vector<std::string> command = wall.Launcher();
  command.insert(command.end(), {Runfile("tests/e2e/wall_clock_client"), b.runtime_dir(), token});
  Process rank1(command);
  absl::StatusOr<std::unique_ptr<Communicator>> joined =
      rank0.client->Join(token, 0, 2, absl::Seconds(30));
  ASSERT_TRUE(joined.ok()) << joined.status() << "\n" << rank1.Output();
  rank0.comm = *std::move(joined);
  ASSERT_TRUE(rank1.WaitForOutput("posted", absl::Seconds(30))) << rank1.Output();

  wall.Step(kHour);
  rank1.Signal(SIGUSR1);
  // The client looked at its clock after the step before anything was sent.
  ASSERT_TRUE(rank1.WaitForOutput("tested: running", absl::Seconds(30))) << rank1.Output();
  rank0.buffer = *rank0.client->AllocBuffer(kCount * sizeof(float));
  std::span<float> data = rank0.buffer.span<float>();
  for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(i) + 0.5f;
  absl::Status sent = rank0.comm->Send(rank0.buffer, 0, kCount, DataType::kFloat32, 1, kTag,
                                       Timeout(absl::Seconds(20)));
  EXPECT_TRUE(sent.ok()) << sent;
  ProcessResult result = rank1.Wait(absl::Seconds(60));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "received 256 floats")) << result.output;
}

}  // namespace
}  // namespace cclo::testing
