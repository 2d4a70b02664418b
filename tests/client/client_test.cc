// libcclo against a real cclod (one per suite, plus one that a test kills): attach, buffers,
// communicators, ops, requests, and the daemon's errors with their codes and messages.
#include "cclo/client.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cclo/v1/attach.h"
#include "cclo/v1/client.grpc.pb.h"
#include "cclo/v1/ring.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hw/clock.h"
#include "tests/client/sessions.h"
#include "tests/e2e/cluster.h"

namespace cclo {
namespace {

using testing::AttachOrDie;
using testing::Group;
using testing::JoinAlone;
using testing::JoinGroup;
using testing::JoinPair;
using ::testing::MatchesRegex;
using testing::Pair;
using ::testing::StartsWith;

// A Buffer of `bytes` fresh local bytes that names daemon buffer `id`: how a test asks the
// daemon about an id this session does not (or no longer) hold.
Buffer BufferNamed(uint64_t id, uint64_t bytes) {
  int fd = memfd_create("forged-buffer", MFD_CLOEXEC);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  absl::StatusOr<Buffer> buffer = Buffer::Map(id, fd, bytes);
  close(fd);
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  return buffer.ok() ? *std::move(buffer) : Buffer();
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new testing::Daemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static const std::string& runtime_dir() { return daemon_->runtime_dir(); }

  static testing::Daemon* daemon_;
};

testing::Daemon* ClientTest::daemon_ = nullptr;

TEST_F(ClientTest, AttachGivesTheDaemonsSession) {
  std::unique_ptr<Client> first = AttachOrDie(runtime_dir());
  std::unique_ptr<Client> second = AttachOrDie(runtime_dir());
  EXPECT_NE(first->session_id(), second->session_id());
  for (const Client* client : {first.get(), second.get()}) {
    const std::string logged =
        absl::StrCat("session ", client->session_id(), " attached: pid ", getpid(), " ");
    EXPECT_TRUE(daemon_->process().WaitForOutput(logged, absl::Seconds(10))) << logged;
  }
}

// A runtime dir whose attach.sock listens (backlog 1) and is served by the test itself.
struct FakeDaemon {
  FakeDaemon() {
    char name[] = "/tmp/cclo.XXXXXX";
    EXPECT_NE(mkdtemp(name), nullptr);
    dir = name;
    path = dir + "/attach.sock";
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(listen(listener, 1), 0);
  }
  ~FakeDaemon() {
    close(listener);
    std::filesystem::remove_all(dir);
  }
  std::string dir;
  std::string path;
  sockaddr_un address{};
  int listener = -1;
};

TEST(AttachTest, RefusedAttachCarriesTheReason) {
  // cclod refuses only clients that break the attach protocol, which libcclo never does; a
  // bare socket stands in for it to force the refusal: it answers the HELLO with REFUSED.
  const FakeDaemon fake;
  std::thread refuser([listener = fake.listener] {
    const int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    absl::StatusOr<attach::Received> hello =
        attach::ReceiveFrame(connection, hw::SteadyNow() + absl::Seconds(10));
    ASSERT_TRUE(hello.ok()) << hello.status();
    EXPECT_EQ(hello->frame.type, attach::FrameType::kHello);
    EXPECT_TRUE(attach::SendFrame(connection,
                                  {attach::FrameType::kRefused, 0, 0, "uid 1234 maps to no tenant"})
                    .ok());
    close(connection);
  });
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(fake.dir);
  refuser.join();
  EXPECT_EQ(client.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(client.status().message(), "cclod refused the attach: uid 1234 maps to no tenant");
}

// A daemon that ends before it answers the HELLO (killed or stopped meanwhile).
TEST(AttachTest, ADaemonGoneDuringTheHandshakeIsNamed) {
  const FakeDaemon fake;
  std::thread gone([listener = fake.listener] {
    const int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_TRUE(attach::ReceiveFrame(connection, hw::SteadyNow() + absl::Seconds(10)).ok());
    close(connection);
  });
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(fake.dir);
  gone.join();
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client.status().message(), absl::StrCat("attach handshake on ", fake.path,
                                                    ": attach socket closed by the other side"));
}

// A daemon that ends the session right after its WELCOME (it was stopping): the attach fails
// at once, not at its timeout, waiting for a client.sock that will not answer.
TEST(AttachTest, ADaemonThatEndsTheSessionAfterItsWelcomeFailsTheAttach) {
  const FakeDaemon fake;
  std::thread welcomer([listener = fake.listener] {
    const int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_TRUE(attach::ReceiveFrame(connection, hw::SteadyNow() + absl::Seconds(10)).ok());
    const int rings[] = {memfd_create("rings", MFD_CLOEXEC), eventfd(0, EFD_CLOEXEC),
                         eventfd(0, EFD_CLOEXEC)};
    EXPECT_TRUE(
        attach::SendFrame(connection, {attach::FrameType::kWelcome, 1, 0, "token"}, rings).ok());
    for (int fd : rings) close(fd);
    close(connection);
  });
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(fake.dir);
  welcomer.join();
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(
      client.status().message(),
      absl::StrCat("cannot connect to unix:", fake.dir,
                   "/client.sock: cclod ended the session (attach socket ", fake.path, " closed)"));
}

TEST(AttachTest, MissingDaemonIsUnavailable) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach("/tmp/no-such-cclod-dir");
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client.status().message(),
            "cannot connect to /tmp/no-such-cclod-dir/attach.sock: No such file or directory");
}

// A daemon that stopped accepting (hung, or stopped by a debugger) fills its listen backlog;
// the attach still ends by its timeout.
TEST(AttachTest, ADaemonThatDoesNotAcceptFailsTheAttachByItsTimeout) {
  const FakeDaemon fake;
  std::vector<int> queued;  // connections nobody accepts, until the backlog is full
  for (int i = 0; i < 16; ++i) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&fake.address), sizeof(fake.address)) != 0) {
      EXPECT_EQ(errno, EAGAIN);
      close(fd);
      break;
    }
    queued.push_back(fd);
  }
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Attach(fake.dir, absl::Milliseconds(500));
  for (int fd : queued) close(fd);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client.status().message(),
            absl::StrCat("cannot connect to ", fake.path,
                         ": its backlog stayed full until the attach deadline (cclod is not "
                         "accepting)"));
}

TEST(AttachTest, OverlongSocketPathIsInvalid) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach("/tmp/" + std::string(120, 'd'));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, BufferIsSharedWithTheDaemonAndFreed) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(4096);
  absl::StatusOr<Buffer> copy = client->AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok() && copy.ok()) << buffer.status() << copy.status();
  EXPECT_NE(buffer->id(), 0u);
  EXPECT_EQ(buffer->size(), 4096u);
  ASSERT_EQ(buffer->span<int32_t>().size(), 1024u);
  std::iota(buffer->span<int32_t>().begin(), buffer->span<int32_t>().end(), 0);
  // The daemon reads what this process wrote and writes where this process reads.
  ASSERT_TRUE(comm->Allreduce(*buffer, *copy, 1024, DataType::kInt32, ReduceOp::kSum).ok());
  EXPECT_TRUE(std::equal(copy->span<int32_t>().begin(), copy->span<int32_t>().end(),
                         buffer->span<int32_t>().begin()));

  const uint64_t id = buffer->id();
  Buffer moved = *std::move(buffer);
  EXPECT_EQ(buffer->data(), nullptr);
  ASSERT_TRUE(client->FreeBuffer(std::move(moved)).ok());
  EXPECT_EQ(moved.data(), nullptr);
  const std::string gone = absl::StrCat("no buffer ", id, " in this session");
  Buffer stale = BufferNamed(id, 4096);
  absl::Status use = comm->Allreduce(stale, *copy, 4, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(use.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(use.message(), "Submit: send buffer: " + gone);
  absl::Status again = client->FreeBuffer(std::move(stale));
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(again.message(), "FreeBuffer: " + gone);
}

// Another Client's buffer is refused by libcclo; a buffer of no Client that names its id,
// by the daemon.
TEST_F(ClientTest, BufferOfAnotherSessionIsRefused) {
  std::unique_ptr<Client> owner = AttachOrDie(runtime_dir());
  std::unique_ptr<Client> intruder = AttachOrDie(runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*intruder);
  absl::StatusOr<Buffer> foreign = owner->AllocBuffer(64);
  ASSERT_TRUE(foreign.ok()) << foreign.status();
  const std::string not_ours = absl::StrCat("buffer ", foreign->id(), " belongs to another Client");
  const std::string not_here = absl::StrCat("no buffer ", foreign->id(), " in this session");
  Buffer named = BufferNamed(foreign->id(), 64);
  absl::Status status = comm->Bcast(*foreign, 0, 16, DataType::kFloat32, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), not_ours);
  status = comm->Bcast(named, 0, 16, DataType::kFloat32, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "Submit: recv buffer: " + not_here);
  foreign->span<uint8_t>()[63] = 7;
  status = intruder->FreeBuffer(*std::move(foreign));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "FreeBuffer: " + not_ours);
  status = intruder->FreeBuffer(std::move(named));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "FreeBuffer: " + not_here);
  // A buffer the daemon did not release stays mapped with its contents, for its owner.
  ASSERT_NE(foreign->data(), nullptr);
  EXPECT_EQ(foreign->span<uint8_t>()[63], 7);
  ASSERT_TRUE(owner->FreeBuffer(*std::move(foreign)).ok());
  EXPECT_EQ(foreign->data(), nullptr);
  EXPECT_EQ(foreign->id(), 0u);
}

// A buffer of a Client attached to another daemon, whose buffer ids are its own, is refused
// by this Client's ops and FreeBuffer instead of being taken for this session's buffer of
// the same id (the op wrote this session's buffer, and FreeBuffer released it).
TEST(ClientOfTwoDaemonsTest, BufferOfAnotherDaemonsClientIsRefused) {
  testing::Daemon here;
  testing::Daemon there;
  std::unique_ptr<Client> client = AttachOrDie(here.runtime_dir());
  std::unique_ptr<Client> elsewhere = AttachOrDie(there.runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> own = client->AllocBuffer(64);
  absl::StatusOr<Buffer> input = client->AllocBuffer(64);
  absl::StatusOr<Buffer> foreign = elsewhere->AllocBuffer(64);
  ASSERT_TRUE(own.ok() && input.ok() && foreign.ok());
  ASSERT_EQ(own->id(), foreign->id());
  std::fill_n(own->span<int32_t>().begin(), 16, 1);
  std::fill_n(input->span<int32_t>().begin(), 16, 5);
  const std::string not_ours = absl::StrCat("buffer ", foreign->id(), " belongs to another Client");
  absl::Status status = comm->Allreduce(*input, *foreign, 16, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), "allreduce recv: " + not_ours);
  status = comm->Send(*foreign, 0, 16, DataType::kInt32, 0, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), not_ours);
  EXPECT_EQ(own->span<int32_t>()[0], 1);
  status = client->FreeBuffer(*std::move(foreign));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), "FreeBuffer: " + not_ours);
  ASSERT_NE(foreign->data(), nullptr);
  EXPECT_TRUE(comm->Allreduce(*input, *own, 16, DataType::kInt32, ReduceOp::kSum).ok());
  EXPECT_EQ(own->span<int32_t>()[0], 5);
  EXPECT_TRUE(elsewhere->FreeBuffer(*std::move(foreign)).ok());
}

TEST_F(ClientTest, DaemonErrorsKeepCodeAndMessage) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(0);
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(buffer.status().message(), "AllocBuffer: buffer size 0 is not in [1, 1073741824]");
}

TEST_F(ClientTest, TextsThatAreNotUtf8AreRefusedBeforeTheirCall) {
  // Protobuf does not send them: the calls failed with no reason at all.
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  EXPECT_EQ(client->Join("cclo1-\xff", 0, 1).status(),
            absl::InvalidArgumentError(
                "JoinCommunicator: token is not UTF-8 text (byte 0xff at offset 6)"));
  EXPECT_EQ(client->CreateCommunicatorId("caf\xe9").status(),
            absl::InvalidArgumentError(
                "CreateCommunicatorId: label is not UTF-8 text (byte 0xe9 at offset 3)"));
}

TEST_F(ClientTest, ConcurrentAllocationsEachGetTheirOwnFd) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 8;
  std::vector<std::vector<Buffer>> buffers(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<Buffer> buffer = client->AllocBuffer(4096 * (1 + t));
        ASSERT_TRUE(buffer.ok()) << buffer.status();
        buffers[t].push_back(*std::move(buffer));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<uint64_t> ids;
  for (int t = 0; t < kThreads; ++t) {
    for (const Buffer& buffer : buffers[t]) {
      EXPECT_EQ(buffer.size(), 4096u * (1 + t));
      ids.insert(buffer.id());
    }
  }
  EXPECT_EQ(ids.size(), size_t{kThreads * kPerThread});
}

TEST_F(ClientTest, SingleRankCommunicator) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  EXPECT_EQ(comm->rank(), 0u);
  EXPECT_EQ(comm->size(), 1u);
  EXPECT_THAT(comm->id_hex(), MatchesRegex("[0-9a-f]{32}"));
  absl::StatusOr<Buffer> send = client->AllocBuffer(64);
  absl::StatusOr<Buffer> recv = client->AllocBuffer(64);
  ASSERT_TRUE(send.ok() && recv.ok());
  for (int i = 0; i < 16; ++i) send->span<float>()[i] = static_cast<float>(i);
  ASSERT_TRUE(comm->Allreduce(*send, *recv, 16, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(recv->span<float>()[15], 15.0f);
  // The rank sends to itself, as MPI and NCCL allow: the receive posted first, the send
  // after it, then both waited for.
  absl::StatusOr<Request> from_self = comm->RecvAsync(*recv, 0, 4, DataType::kInt32, 0, 7);
  ASSERT_TRUE(from_self.ok()) << from_self.status();
  ASSERT_TRUE(comm->Send(*send, 32, 4, DataType::kInt32, 0, 7).ok());
  ASSERT_TRUE(from_self->Wait().ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(recv->span<float>()[i], static_cast<float>(i + 8));
}

TEST_F(ClientTest, TwoRanksAllreduceAndBcast) {
  // The sessions outlive both ranks' ops: a session that ends breaks its communicators, and
  // the bcast root may finish before the other rank has submitted.
  Pair pair = JoinPair(runtime_dir());
  std::vector<std::vector<int64_t>> results(2);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      Communicator& comm = *pair.comms[rank];
      absl::StatusOr<Buffer> buffer = pair.clients[rank]->AllocBuffer(3 * sizeof(int64_t));
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      std::span<int64_t> values = buffer->span<int64_t>();
      for (int i = 0; i < 3; ++i) values[i] = (rank + 1) * (i + 1);
      absl::Status status = comm.Allreduce(*buffer, *buffer, 3, DataType::kInt64, ReduceOp::kSum);
      ASSERT_TRUE(status.ok()) << status;
      results[rank].assign(values.begin(), values.end());
      if (rank == 1) values[0] = 99;
      status = comm.Bcast(*buffer, 0, 1, DataType::kInt64, 1);
      ASSERT_TRUE(status.ok()) << status;
      results[rank].push_back(values[0]);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  for (const std::vector<int64_t>& result : results) {
    EXPECT_EQ(result, (std::vector<int64_t>{3, 6, 9, 99}));
  }
}

TEST_F(ClientTest, RequestWaitTimesOutAndStaysValid) {
  Pair pair = JoinPair(runtime_dir());
  absl::StatusOr<Buffer> in = pair.clients[0]->AllocBuffer(16);
  absl::StatusOr<Buffer> out = pair.clients[1]->AllocBuffer(16);
  ASSERT_TRUE(in.ok() && out.ok());
  absl::StatusOr<Request> receive = pair.comms[0]->RecvAsync(*in, 8, 2, DataType::kInt32, 1, 3);
  ASSERT_TRUE(receive.ok()) << receive.status();

  absl::Status waited = receive->Wait(absl::Milliseconds(50));
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(waited.message(), absl::StrCat("op ", receive->op_id(), " still running after 50ms"));
  absl::StatusOr<bool> done = receive->Test();
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  EXPECT_FALSE(receive->done());

  // A Request moved from says so rather than failing somewhere else, and holds no op: it
  // kept the id of the op that is now the other's.
  const uint64_t op_id = receive->op_id();
  Request moved = *std::move(receive);
  EXPECT_EQ(moved.op_id(), op_id);
  EXPECT_EQ(receive->op_id(), 0u);
  EXPECT_EQ(receive->Wait().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(receive->Test().status().message(), "this Request was moved from");
  EXPECT_EQ(receive->Cancel().code(), absl::StatusCode::kFailedPrecondition);
  receive = std::move(moved);

  out->span<int32_t>()[0] = 42;
  out->span<int32_t>()[1] = 43;
  ASSERT_TRUE(pair.comms[1]->Send(*out, 0, 2, DataType::kInt32, 0, 3).ok());
  EXPECT_TRUE(receive->Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(in->span<int32_t>()[2], 42);
  EXPECT_EQ(in->span<int32_t>()[3], 43);
  EXPECT_EQ(receive->algorithm(), "direct");
  EXPECT_GT(receive->elapsed(), absl::ZeroDuration());
  done = receive->Test();
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done);
  EXPECT_TRUE(receive->Wait().ok());
  // Moved from once done, it is not done (it kept the done() of the op it gave away).
  moved = *std::move(receive);
  EXPECT_TRUE(moved.done());
  EXPECT_FALSE(receive->done());
  EXPECT_EQ(receive->op_id(), 0u);
}

// Ops that finished while this process called no libcclo (busy, or stopped) past their
// deadline plus Request::kReportGrace, more of them than the completion ring holds (the
// daemon keeps the rest until there is room): Wait and Test give each its daemon's result,
// not "daemon did not report op N done by its deadline (plus 10s); it may be stuck" for
// those the daemon kept (the first ones, which the daemon fails last). All 1500 are
// submitted before the first deadline: a communicator broken by it takes no more.
TEST(ClientRingFullTest, ResultsTheDaemonKeptPastTheirDeadlineAreTheirOwn) {
  testing::Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 4096}\n");
  Pair pair = JoinPair(daemon.runtime_dir());
  absl::StatusOr<Buffer> in = pair.clients[0]->AllocBuffer(16);
  ASSERT_TRUE(in.ok()) << in.status();
  constexpr absl::Duration kTimeout = absl::Seconds(5);
  std::vector<Request> receives;
  // More than the completion ring holds: the daemon keeps the rest.
  static_assert(1500 > ring::kCompletionSlots);
  for (uint32_t tag = 0; tag < 1500; ++tag) {
    absl::StatusOr<Request> receive =
        pair.comms[0]->RecvAsync(*in, 0, 4, DataType::kInt32, 1, tag, {.timeout = kTimeout});
    ASSERT_TRUE(receive.ok()) << tag << ": " << receive.status();
    receives.push_back(*std::move(receive));
  }
  absl::SleepFor(kTimeout + Request::kReportGrace + absl::Seconds(1));
  for (size_t i = 0; i < receives.size(); ++i) {
    // Every other one asked with Test, until it says more than "still running".
    absl::Status result;
    if (i % 2 == 0) {
      result = receives[i].Wait(2 * Request::kReportGrace);
    } else {
      const absl::Time give_up = absl::Now() + Request::kReportGrace;
      absl::StatusOr<bool> tested = false;
      while (tested.ok() && !*tested && absl::Now() < give_up) tested = receives[i].Test();
      ASSERT_FALSE(tested.ok()) << receives[i].op_id() << ": still running, or OK";
      result = tested.status();
    }
    // The first to miss its deadline broke the communicator for the others.
    EXPECT_THAT(result.code(), ::testing::AnyOf(absl::StatusCode::kDeadlineExceeded,
                                                absl::StatusCode::kUnavailable))
        << receives[i].op_id() << ": " << result;
    EXPECT_TRUE(absl::StrContains(result.message(), "missed its deadline") ||
                absl::StrContains(result.message(), "did not finish by its deadline"))
        << receives[i].op_id() << ": " << result;
  }
}

TEST_F(ClientTest, FailedOpReportsTheDaemonsError) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(16);
  ASSERT_TRUE(buffer.ok());
  absl::Status status = comm->Allreduce(*buffer, *buffer, 4, DataType::kFloat32, ReduceOp::kSum,
                                        {.algorithm = "fail"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  // The valid names follow; the firmware tables grow, so only the first is checked.
  EXPECT_THAT(std::string(status.message()),
              StartsWith("unknown allreduce algorithm 'fail'; valid: ring"));

  absl::StatusOr<Request> request =
      comm->BcastAsync(*buffer, 0, 4, DataType::kFloat32, 0, {.algorithm = "fail"});
  ASSERT_TRUE(request.ok()) << request.status();
  status = request->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              StartsWith("unknown bcast algorithm 'fail'; valid: one_to_all"));
  EXPECT_EQ(request->Test().status(), status);
  // A refused algorithm is the op's own error: the communicator still works.
  EXPECT_TRUE(comm->Bcast(*buffer, 0, 4, DataType::kFloat32, 0).ok());
}

TEST_F(ClientTest, RangeOutsideTheBufferFailsBeforeSubmitting) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(16);
  ASSERT_TRUE(buffer.ok());
  absl::Status status = comm->Send(*buffer, 8, 3, DataType::kInt32, 0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(status.message(), absl::StrCat("range of 12 bytes at offset 8 exceeds buffer ",
                                           buffer->id(), " of 16 bytes"));
  status = comm->Recv(*buffer, 0, uint64_t{1} << 62, DataType::kInt64, 0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  // A value outside the enum is refused, not looked up.
  status = comm->Allreduce(*buffer, *buffer, 2, static_cast<DataType>(42), ReduceOp::kSum);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "allreduce send: unknown datatype 42");
}

TEST_F(ClientTest, TimeoutsAreValidatedAndRoundedUp) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(64);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  OpOptions negative;
  negative.timeout = absl::Milliseconds(-5);
  absl::Status status =
      comm->Allreduce(*buffer, *buffer, 16, DataType::kFloat32, ReduceOp::kSum, negative);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "op timeout -5ms is negative");
  // An unbounded timeout is capped to the largest the RPC can carry, not wrapped around.
  OpOptions unbounded;
  unbounded.timeout = absl::InfiniteDuration();
  EXPECT_TRUE(
      comm->Allreduce(*buffer, *buffer, 16, DataType::kFloat32, ReduceOp::kSum, unbounded).ok());
  absl::StatusOr<std::unique_ptr<Communicator>> joined =
      client->Join("cclo1-x", 0, 1, absl::Seconds(-1));
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().message(), "join timeout -1s is negative");
  // An attach timeout is also every plain RPC's deadline: none that is not positive.
  for (absl::Duration attach : {absl::ZeroDuration(), absl::Seconds(-1)}) {
    EXPECT_EQ(Client::Attach(runtime_dir(), attach).status(),
              absl::InvalidArgumentError(absl::StrCat(
                  "attach timeout ", absl::FormatDuration(attach), " is not positive")));
  }
}

TEST_F(ClientTest, DestroyedCommunicatorRefusesOps) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(16);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(comm->Destroy().ok());
  absl::Status status = comm->Bcast(*buffer, 0, 1, DataType::kInt8, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), absl::StrCat("communicator ", comm->id_hex(), " was destroyed"));
}

// A Communicator and a Request outliving their Client: every call says the session is
// closed with FAILED_PRECONDITION, those through the command ring and the RPCs alike (a
// Destroy or Cancel was UNAVAILABLE, as if the daemon had gone).
TEST_F(ClientTest, CallsAfterTheClientWasDestroyedSayTheSessionIsClosed) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(16);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  absl::StatusOr<Request> receive =
      comm->RecvAsync(*buffer, 0, 4, DataType::kInt32, 0, 1, {.timeout = absl::Hours(1)});
  ASSERT_TRUE(receive.ok()) << receive.status();
  client.reset();
  for (const absl::Status& status :
       {comm->Nop(), comm->Destroy(), receive->Cancel(), receive->Wait()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "the session is closed")) << status;
  }
  // An op is refused before it is posted to the command ring (not after waiting there).
  EXPECT_EQ(comm->Nop().message(), "Submit: the session is closed");
}

TEST_F(ClientTest, JoinTimesOutWhenRanksAreMissing) {
  std::unique_ptr<Client> client = AttachOrDie(runtime_dir());
  absl::StatusOr<std::string> token = client->CreateCommunicatorId();
  ASSERT_TRUE(token.ok());
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      client->Join(*token, 0, 2, absl::Milliseconds(50));
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded);
  const std::string root = token->substr(token->rfind('-') + 1);
  EXPECT_THAT(std::string(comm.status().message()),
              StartsWith("JoinCommunicator: join at root daemon " + root + " failed: "));
}

TEST_F(ClientTest, OpPastItsDeadlineFailsAndBreaksTheCommunicator) {
  Pair pair = JoinPair(runtime_dir());
  absl::StatusOr<Buffer> in = pair.clients[0]->AllocBuffer(16);
  absl::StatusOr<Buffer> out = pair.clients[1]->AllocBuffer(16);
  ASSERT_TRUE(in.ok() && out.ok());
  const std::string late = absl::StrCat("recv on rank 0 of communicator ", pair.comms[0]->id_hex(),
                                        " did not finish by its deadline: 0 of 1 moves done; "
                                        "move 0: receive from rank 1 (tag 9, message 0): "
                                        "nothing arrived");
  absl::Status status =
      pair.comms[0]->Recv(*in, 0, 4, DataType::kInt32, 1, 9, {.timeout = absl::Milliseconds(200)});
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(), late);
  // The late op broke the communicator for every rank.
  status = pair.comms[1]->Send(*out, 0, 4, DataType::kInt32, 0, 9);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            absl::StrCat("Submit: communicator ", pair.comms[0]->id_hex(), " is broken: ", late));
}

// A daemon that breaks the communicator (here for a missed deadline) tells the others it
// broke it, and their ranks' ops say so, not that its ranks left.
TEST_F(ClientTest, OpsOnOtherDaemonsSayTheDaemonThatBrokeTheCommunicatorBrokeIt) {
  testing::Daemon other;
  Group group = JoinGroup({runtime_dir(), other.runtime_dir()});
  absl::StatusOr<Buffer> in0 = group.clients[0]->AllocBuffer(16);
  absl::StatusOr<Buffer> in1 = group.clients[1]->AllocBuffer(16);
  ASSERT_TRUE(in0.ok() && in1.ok());
  absl::StatusOr<Request> waiting =
      group.comms[1]->RecvAsync(*in1, 0, 4, DataType::kInt32, 0, 9, {.timeout = absl::Seconds(20)});
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  const absl::Status late = group.comms[0]->Recv(*in0, 0, 4, DataType::kInt32, 1, 9,
                                                 {.timeout = absl::Milliseconds(200)});
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_EQ(waiting->Wait(),
            absl::UnavailableError(absl::StrCat("peer daemon ", daemon_->data_address(),
                                                " broke the communicator: recv on rank 0 "
                                                "of communicator ",
                                                group.comms[0]->id_hex(), " missed its deadline")));
}

// A rank that destroys the communicator while another rank on its daemon waits in an op
// that needs it: that op fails at once naming the reason, as one on another daemon does,
// instead of waiting for the rank until its deadline.
TEST_F(ClientTest, DestroyFailsTheOpsThatNeedTheRankOnItsDaemonToo) {
  testing::Daemon other;
  Group group = JoinGroup({runtime_dir(), runtime_dir(), other.runtime_dir()});
  std::vector<Buffer> buffers;
  std::vector<Request> sums;
  for (uint32_t rank = 1; rank < 3; ++rank) {
    absl::StatusOr<Buffer> buffer = group.clients[rank]->AllocBuffer(16);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffers.push_back(*std::move(buffer));
    absl::StatusOr<Request> sum =
        group.comms[rank]->AllreduceAsync(buffers.back(), buffers.back(), 4, DataType::kInt32,
                                          ReduceOp::kSum, {.timeout = absl::Seconds(20)});
    ASSERT_TRUE(sum.ok()) << sum.status();
    sums.push_back(*std::move(sum));
  }
  ASSERT_TRUE(group.comms[0]->Destroy().ok());
  const absl::Status same_daemon = sums[0].Wait();
  EXPECT_EQ(same_daemon.code(), absl::StatusCode::kUnavailable) << same_daemon;
  EXPECT_EQ(same_daemon.message(), "rank 0 destroyed the communicator");
  const absl::Status other_daemon = sums[1].Wait();
  EXPECT_EQ(other_daemon.code(), absl::StatusCode::kUnavailable) << other_daemon;
  EXPECT_THAT(std::string(other_daemon.message()),
              ::testing::EndsWith(": rank 0 destroyed the communicator"));
}

// The same for a rank on another daemon whose ops need only the destroyed rank (a receive
// from it, a send to it that waits for its clear-to-send): its daemon hears of it, so they
// fail at once naming it instead of waiting until their deadline.
TEST_F(ClientTest, DestroyFailsTheOpsOnOtherDaemonsThatNeedOnlyThatRank) {
  testing::Daemon other;
  Group group = JoinGroup({runtime_dir(), runtime_dir(), other.runtime_dir()});
  absl::StatusOr<Buffer> small = group.clients[2]->AllocBuffer(16);
  // Past the daemon's eager limit (256 KiB): the send asks for a clear-to-send.
  absl::StatusOr<Buffer> large = group.clients[2]->AllocBuffer(1 << 20);
  ASSERT_TRUE(small.ok() && large.ok());
  // A deadline that bounds the wait, were the departure not told.
  const OpOptions bounded{.timeout = absl::Seconds(10)};
  absl::StatusOr<Request> from0 =
      group.comms[2]->RecvAsync(*small, 0, 4, DataType::kInt32, 0, 1, bounded);
  absl::StatusOr<Request> to0 =
      group.comms[2]->SendAsync(*large, 0, (1 << 20) / 4, DataType::kInt32, 0, 2, bounded);
  ASSERT_TRUE(from0.ok() && to0.ok()) << from0.status() << to0.status();
  ASSERT_TRUE(group.comms[0]->Destroy().ok());
  const absl::Status left =
      absl::UnavailableError(absl::StrCat("rank 0 on peer daemon ", daemon_->data_address(),
                                          " left: rank 0 destroyed the communicator"));
  EXPECT_EQ(from0->Wait(), left);
  EXPECT_EQ(to0->Wait(), left);
}

TEST_F(ClientTest, KilledDaemonIsUnavailable) {
  testing::Daemon doomed;
  Pair pair = JoinPair(doomed.runtime_dir());
  absl::StatusOr<Buffer> in = pair.clients[0]->AllocBuffer(16);
  absl::StatusOr<Buffer> out = pair.clients[1]->AllocBuffer(16);
  ASSERT_TRUE(in.ok() && out.ok());
  absl::StatusOr<Request> receive = pair.comms[0]->RecvAsync(*in, 0, 4, DataType::kInt32, 1, 5);
  absl::StatusOr<Request> tested = pair.comms[0]->RecvAsync(*in, 0, 4, DataType::kInt32, 1, 6);
  ASSERT_TRUE(receive.ok() && tested.ok()) << receive.status() << tested.status();
  doomed.process().Signal(SIGKILL);
  EXPECT_EQ(doomed.process().Wait(absl::Seconds(10)).exit_code, -1);

  // An MPI_Test-style loop learns it too (bounded here; it would spin forever otherwise).
  absl::StatusOr<bool> test = false;
  const hw::SteadyTime give_up = hw::SteadyNow() + absl::Seconds(30);
  while (test.ok() && !*test && hw::SteadyNow() < give_up) test = tested->Test();
  EXPECT_EQ(test.status().code(), absl::StatusCode::kUnavailable) << test.status();
  absl::Status status = receive->Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith("Wait: "));
  status = pair.comms[1]->Send(*out, 0, 4, DataType::kInt32, 0, 5);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith("Submit: "));
  status = pair.clients[0]->AllocBuffer(16).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith("AllocBuffer: "));
  status = Client::Attach(doomed.runtime_dir()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), absl::StrCat("cannot connect to ", doomed.runtime_dir(),
                                           "/attach.sock: Connection refused"));
}

// After a daemon restart the old session's calls over gRPC say UNAVAILABLE (attach
// again), as the command ring does, not the new daemon's answer to a token it never gave.
TEST_F(ClientTest, RestartedDaemonIsUnavailableToTheOldSession) {
  testing::Daemon daemon;
  const std::string runtime_dir = daemon.runtime_dir();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(runtime_dir);
  ASSERT_TRUE(client.ok()) << client.status();
  daemon.process().Signal(SIGKILL);
  daemon.Restart();

  // The first calls may find the old connection broken; once gRPC reaches the new daemon,
  // that one refuses the token. Every answer is UNAVAILABLE.
  bool refused = false;
  const hw::SteadyTime give_up = hw::SteadyNow() + absl::Seconds(30);
  while (!refused && hw::SteadyNow() < give_up) {
    const absl::Status status = (*client)->AllocBuffer(16).status();
    ASSERT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    ASSERT_THAT(std::string(status.message()),
                StartsWith(absl::StrCat("AllocBuffer: cclod ended the session (attach socket ",
                                        runtime_dir, "/attach.sock closed); attach again (")));
    refused = absl::StrContains(status.message(), "no live session");
    if (!refused) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(refused) << "the new daemon was never reached";
  EXPECT_TRUE(Client::Attach(runtime_dir).ok());
  daemon.process().Signal(SIGTERM);
  EXPECT_EQ(daemon.process().Wait(absl::Seconds(20)).exit_code, 0);
}

// gRPC answers a call that reached client.sock as the daemon stopped, before a handler took
// it, with a bare CANCELLED "CANCELLED". A stand-in client.sock answers so once the daemon
// behind its attach socket stopped: the call says that the daemon ended the session, as one
// that lost its connection does (it said "AllocBuffer: CANCELLED").
class StoppingClientSocket final : public v1::Client::Service {
 public:
  explicit StoppingClientSocket(testing::Daemon& daemon) : daemon_(daemon) {}

  grpc::Status AllocBuffer(grpc::ServerContext*, const v1::AllocBufferRequest*,
                           v1::AllocBufferResponse*) override {
    daemon_.process().Signal(SIGTERM);
    EXPECT_EQ(daemon_.process().Wait(absl::Seconds(20)).exit_code, 0);
    return grpc::Status(grpc::StatusCode::CANCELLED, "CANCELLED");
  }

 private:
  testing::Daemon& daemon_;
};

TEST_F(ClientTest, CallCancelledAsTheDaemonStopsSaysItEndedTheSession) {
  testing::Daemon daemon;
  StoppingClientSocket service(daemon);
  testing::StandInClientSocket stand_in(daemon.runtime_dir(), service);
  std::unique_ptr<Client> client = AttachOrDie(stand_in.runtime_dir());

  const absl::Status status = client->AllocBuffer(16).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(status.message(),
            absl::StrCat("AllocBuffer: cclod ended the session (attach socket ",
                         stand_in.runtime_dir(), "/attach.sock closed); attach again (CANCELLED)"));
}

}  // namespace
}  // namespace cclo
