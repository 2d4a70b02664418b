// libcclo used as MPI_THREAD_MULTIPLE programs use it, against a real cclod: several threads
// on one Request, Requests outliving their Communicator or Client, forked children, and
// signals arriving during waits.
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
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

// A Request outlives its Communicator and its Client: its Wait ends with an error naming
// the closed session rather than waiting for the op's deadline.
TEST(ThreadsTest, RequestOutlivingItsClientEnds) {
  testing::Daemon daemon;
  Pair pair = JoinPair(daemon.runtime_dir());
  absl::StatusOr<Buffer> in = pair.clients[0]->AllocBuffer(16);
  ASSERT_TRUE(in.ok()) << in.status();
  absl::StatusOr<Request> receive =
      pair.comms[0]->RecvAsync(*in, 0, 4, DataType::kInt32, 1, 1, {.timeout = absl::Hours(1)});
  ASSERT_TRUE(receive.ok()) << receive.status();
  pair.comms[0].reset();
  pair.clients[0].reset();
  absl::Status status = receive->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(status.message(), "Wait: the session is closed");
}

// A communicator destroyed with an op in flight (its only rank on this daemon): the op ends
// with UNAVAILABLE naming the destruction, and its Request stays usable.
TEST(ThreadsTest, DestroyedCommunicatorEndsItsOpsInFlight) {
  testing::Daemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon.runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> in = client->AllocBuffer(16);
  ASSERT_TRUE(in.ok()) << in.status();
  absl::StatusOr<Request> receive =
      comm->RecvAsync(*in, 0, 4, DataType::kInt32, 0, 1, {.timeout = absl::Hours(1)});
  ASSERT_TRUE(receive.ok()) << receive.status();
  ASSERT_TRUE(comm->Destroy().ok());
  absl::Status status = receive->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "rank 0 destroyed the communicator")) << status;
  EXPECT_EQ(receive->Test().status(), status);
}

// An op held for its `after` when its rank destroys the communicator ends as one on the
// engine then: UNAVAILABLE naming the destruction (it ended NOT_FOUND, "no communicator
// handle 2 in this session", once its `after` finished), and the rank that stays on this
// daemon goes on.
TEST(ThreadsTest, DestroyedCommunicatorEndsItsHeldOps) {
  testing::Daemon daemon;
  Pair pair = JoinPair(daemon.runtime_dir());
  std::unique_ptr<Communicator> gate = JoinAlone(*pair.clients[0]);
  absl::StatusOr<Buffer> buffer = pair.clients[0]->AllocBuffer(16);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  absl::StatusOr<Request> receive = gate->RecvAsync(*buffer, 0, 1, DataType::kInt32, 0, 1);
  ASSERT_TRUE(receive.ok()) << receive.status();
  absl::StatusOr<Request> held = pair.comms[0]->NopAsync({.after = {&*receive}});
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(pair.comms[0]->Destroy().ok());
  ASSERT_TRUE(gate->Send(*buffer, 8, 1, DataType::kInt32, 0, 1).ok());
  EXPECT_TRUE(receive->Wait().ok());
  absl::Status status = held->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(status.message(), "rank 0 destroyed the communicator");
  EXPECT_TRUE(pair.comms[1]->Nop().ok());
}

// Threads submitting ops while another destroys the communicator: each op succeeds or
// fails as the communicator's destruction, never with the daemon's refusal of the handle
// the Destroy() released before it returned (NOT_FOUND "Submit: no communicator handle 2
// in this session") or with the engine's of the communicator it forgot (NOT_FOUND
// "unknown communicator ...").
TEST(ThreadsTest, OpsRacingADestroyFailAsDestroyed) {
  testing::Daemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon.runtime_dir());
  constexpr int kThreads = 3;
  for (int round = 0; round < 20; ++round) {
    std::unique_ptr<Communicator> comm = JoinAlone(*client);
    std::latch start(kThreads + 1);
    std::vector<std::vector<absl::Status>> results(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        absl::Status status;
        while (status.ok()) results[i].push_back(status = comm->Nop());
      });
    }
    start.arrive_and_wait();
    ASSERT_TRUE(comm->Destroy().ok());
    for (std::thread& thread : threads) thread.join();
    for (const std::vector<absl::Status>& statuses : results) {
      const absl::Status& last = statuses.back();
      EXPECT_TRUE(
          (last.code() == absl::StatusCode::kFailedPrecondition &&
           last.message() == absl::StrCat("communicator ", comm->id_hex(), " was destroyed")) ||
          (last.code() == absl::StatusCode::kUnavailable &&
           last.message() == "rank 0 destroyed the communicator"))
          << round << ": " << last;
    }
  }
}

// Threads submitting ops on one rank while the client of the other rank on the same daemon
// exits: each op succeeds or fails as the communicator's break for that rank, never as a
// destruction by its own rank (an op the daemon passed to the engine as the break took the
// communicator out of it ended 'rank 1 destroyed the communicator').
TEST(ThreadsTest, OpsRacingAnotherRanksExitFailAsItsExit) {
  testing::Daemon daemon;
  constexpr int kThreads = 3;
  for (int round = 0; round < 500; ++round) {
    Pair pair = JoinPair(daemon.runtime_dir());
    std::latch start(kThreads + 1);
    std::vector<absl::Status> last(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        while (last[i].ok()) last[i] = pair.comms[1]->Nop();
      });
    }
    start.arrive_and_wait();
    pair.comms[0].reset();
    pair.clients[0].reset();
    for (std::thread& thread : threads) thread.join();
    for (const absl::Status& status : last) {
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << round << ": " << status;
      EXPECT_TRUE(absl::StrContains(status.message(), "rank 0 left: its client"))
          << round << ": " << status;
    }
  }
}

void Ignore(int) {}

// Signals arriving at a thread waiting on a Request (EINTR in its sleeps) do not end the
// wait: it returns the op's result.
// Threads destroying one communicator at once: each gets what a second Destroy after the
// first gets, OK (one of them got the daemon's refusal of the handle the other released).
TEST(ThreadsTest, ConcurrentDestroysAreAsSequentialOnes) {
  testing::Daemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon.runtime_dir());
  constexpr int kThreads = 4;
  for (int round = 0; round < 10; ++round) {
    std::unique_ptr<Communicator> comm = JoinAlone(*client);
    std::latch start(kThreads);
    std::vector<absl::Status> destroyed(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        destroyed[i] = comm->Destroy();
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const absl::Status& status : destroyed)
      EXPECT_TRUE(status.ok()) << round << ": " << status;
  }
}

TEST(ThreadsTest, SignalsDoNotEndAWait) {
  testing::Daemon daemon;
  Pair pair = JoinPair(daemon.runtime_dir());
  absl::StatusOr<Buffer> in = pair.clients[0]->AllocBuffer(16);
  absl::StatusOr<Buffer> out = pair.clients[1]->AllocBuffer(16);
  ASSERT_TRUE(in.ok() && out.ok());
  struct sigaction action {};
  action.sa_handler = Ignore;  // no SA_RESTART: sleeping calls fail with EINTR
  struct sigaction previous {};
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);
  absl::StatusOr<Request> receive = pair.comms[0]->RecvAsync(*in, 0, 4, DataType::kInt32, 1, 1);
  ASSERT_TRUE(receive.ok()) << receive.status();
  std::atomic<bool> returned = false;
  absl::Status waited;
  std::thread waiter([&] {
    waited = receive->Wait();
    returned = true;
  });
  for (int i = 0; i < 2000; ++i) pthread_kill(waiter.native_handle(), SIGUSR1);
  EXPECT_FALSE(returned.load());
  out->span<int32_t>()[0] = 7;
  EXPECT_TRUE(pair.comms[1]->Send(*out, 0, 4, DataType::kInt32, 0, 1).ok());
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited;
  EXPECT_EQ(in->span<int32_t>()[0], 7);
  sigaction(SIGUSR1, &previous, nullptr);
}

// A forked child shares its parent's rings (shared memory) and attach socket: libcclo
// refuses to use them there, and the parent's session goes on undisturbed.
TEST(ThreadsTest, AForkedChildCannotUseItsParentsSession) {
  testing::Daemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon.runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Request> pending = comm->NopAsync();
  ASSERT_TRUE(pending.ok()) << pending.status();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: which call was not refused with FAILED_PRECONDITION.
    if (comm->Nop().code() != absl::StatusCode::kFailedPrecondition) _exit(1);
    if (pending->Wait().code() != absl::StatusCode::kFailedPrecondition) _exit(2);
    { Request dropped = std::move(*pending); }  // touches nothing of the parent's
    if (comm->Destroy().code() != absl::StatusCode::kFailedPrecondition) _exit(3);
    comm.reset();
    client.reset();  // the session's last reference here: closes the child's copies
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: the child's Nop ran; 2: the child's Wait ran; 3: the child's Destroy ran";
  EXPECT_TRUE(pending->Wait().ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(comm->Nop().ok()) << i;
}

// Nor can a forked child attach a Client of its own: its gRPC channel would share the
// parent's connection to client.sock (the parent's next call then hung until its deadline,
// DEADLINE_EXCEEDED; a child's call hung for good when the parent's threads read its
// answer). Attach says so, and the parent's calls go on.
TEST(ThreadsTest, AForkedChildCannotAttachAndItsParentsCallsGoOn) {
  testing::Daemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon.runtime_dir());
  ASSERT_TRUE(client->CreateCommunicatorId().ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: 1 the child attached; 2 the refusal does not say why.
    absl::StatusOr<std::unique_ptr<Client>> own = Client::Attach(daemon.runtime_dir());
    if (own.ok()) {
      (void)(*own)->CreateCommunicatorId();  // as the child would go on
      _exit(1);
    }
    if (own.status().code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(own.status().message(), "does not work after a fork")) {
      _exit(2);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the child attached; 2: its refusal does not say why";
  absl::StatusOr<std::string> token = client->CreateCommunicatorId();
  EXPECT_TRUE(token.ok()) << token.status();
}

// A forked child that lives on without calling libcclo (a worker) does not keep its
// parent's session: once the parent destroys its Client the daemon ends the session, and
// the other rank's receive from it fails naming the rank instead of waiting for its
// deadline. (The child's copy of the attach socket kept the session open while the child
// lived: the receive ended DEADLINE_EXCEEDED.)
TEST(ThreadsTest, AForkedChildDoesNotKeepItsParentsSessionOpen) {
  testing::Daemon daemon;
  Pair pair = JoinPair(daemon.runtime_dir());
  absl::StatusOr<Buffer> in = pair.clients[1]->AllocBuffer(16);
  ASSERT_TRUE(in.ok()) << in.status();
  int release[2];
  ASSERT_EQ(pipe(release), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(release[1]);
    char byte;
    (void)!read(release[0], &byte, 1);  // lives until the parent has its answer
    _exit(0);
  }
  close(release[0]);
  pair.comms[0].reset();
  pair.clients[0].reset();
  absl::Status status =
      pair.comms[1]->Recv(*in, 0, 4, DataType::kInt32, 0, 1, {.timeout = absl::Seconds(20)});
  close(release[1]);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "rank 0")) << status;
}

}  // namespace
}  // namespace cclo
