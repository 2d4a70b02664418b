// libcclo against the in-process fake daemon: attach, buffers, communicators, ops, requests.
#include "cclo/client.h"

#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/client/fake_daemon.h"

namespace cclo {
namespace {

using testing::FakeDaemon;

std::unique_ptr<Client> AttachOrDie(const FakeDaemon& daemon) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon.runtime_dir());
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// A communicator of one rank on `client`.
std::unique_ptr<Communicator> JoinAlone(Client& client) {
  absl::StatusOr<std::string> token = client.CreateCommunicatorId();
  EXPECT_TRUE(token.ok()) << token.status();
  absl::StatusOr<std::unique_ptr<Communicator>> comm = client.Join(*token, 0, 1);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? *std::move(comm) : nullptr;
}

// Two sessions on `daemon` joined as ranks 0 and 1 of one communicator.
struct Pair {
  std::unique_ptr<Client> clients[2];
  std::unique_ptr<Communicator> comms[2];
};

Pair JoinPair(const FakeDaemon& daemon) {
  Pair pair;
  for (auto& client : pair.clients) client = AttachOrDie(daemon);
  absl::StatusOr<std::string> token = pair.clients[0]->CreateCommunicatorId();
  EXPECT_TRUE(token.ok()) << token.status();
  std::thread rank1([&] {
    absl::StatusOr<std::unique_ptr<Communicator>> comm = pair.clients[1]->Join(*token, 1, 2);
    EXPECT_TRUE(comm.ok()) << comm.status();
    if (comm.ok()) pair.comms[1] = *std::move(comm);
  });
  absl::StatusOr<std::unique_ptr<Communicator>> comm = pair.clients[0]->Join(*token, 0, 2);
  EXPECT_TRUE(comm.ok()) << comm.status();
  if (comm.ok()) pair.comms[0] = *std::move(comm);
  rank1.join();
  return pair;
}

TEST(ClientTest, AttachGivesTheDaemonsSession) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
  EXPECT_EQ(client->session_id(), 1u);
  EXPECT_EQ(daemon.last_token(), "token-1");
}

TEST(ClientTest, RefusedAttachCarriesTheReason) {
  FakeDaemon::Options options;
  options.refuse_reason = "uid 1234 maps to no tenant";
  FakeDaemon daemon(options);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon.runtime_dir());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(client.status().message().find("uid 1234 maps to no tenant"), absl::string_view::npos)
      << client.status();
}

TEST(ClientTest, MissingDaemonIsUnavailable) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach("/tmp/no-such-cclod-dir");
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("/tmp/no-such-cclod-dir/attach.sock"),
            absl::string_view::npos);
}

TEST(ClientTest, OverlongSocketPathIsInvalid) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach("/tmp/" + std::string(120, 'd'));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClientTest, BufferIsSharedWithTheDaemonAndFreed) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_NE(buffer->id(), 0u);
  EXPECT_EQ(buffer->size(), 4096u);
  ASSERT_EQ(buffer->span<int32_t>().size(), 1024u);
  std::iota(buffer->span<int32_t>().begin(), buffer->span<int32_t>().end(), 0);
  EXPECT_EQ(buffer->span<int32_t>()[1023], 1023);
  EXPECT_EQ(daemon.buffer_count(), 1u);

  Buffer moved = *std::move(buffer);
  EXPECT_EQ(buffer->data(), nullptr);
  ASSERT_TRUE(client->FreeBuffer(std::move(moved)).ok());
  EXPECT_EQ(moved.data(), nullptr);
  EXPECT_EQ(daemon.buffer_count(), 0u);
}

TEST(ClientTest, DaemonErrorsKeepCodeAndMessage) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(0);
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(buffer.status().message(), "AllocBuffer: buffer of 0 bytes");
}

TEST(ClientTest, ConcurrentAllocationsEachGetTheirOwnFd) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
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

TEST(ClientTest, SingleRankCommunicator) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  EXPECT_EQ(comm->rank(), 0u);
  EXPECT_EQ(comm->size(), 1u);
  EXPECT_FALSE(comm->id_hex().empty());
  absl::StatusOr<Buffer> send = client->AllocBuffer(64);
  absl::StatusOr<Buffer> recv = client->AllocBuffer(64);
  ASSERT_TRUE(send.ok() && recv.ok());
  for (int i = 0; i < 16; ++i) send->span<float>()[i] = static_cast<float>(i);
  ASSERT_TRUE(comm->Allreduce(*send, *recv, 16, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(recv->span<float>()[15], 15.0f);
  absl::Status to_self = comm->Send(*send, 0, 4, DataType::kInt32, 0, 7);
  EXPECT_EQ(to_self.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(to_self.message(), "Submit: peer 0 is not another rank");
}

TEST(ClientTest, TwoRanksAllreduceAndBcast) {
  FakeDaemon daemon;
  std::unique_ptr<Client> creator = AttachOrDie(daemon);
  absl::StatusOr<std::string> token = creator->CreateCommunicatorId();
  ASSERT_TRUE(token.ok());
  std::vector<std::vector<int64_t>> results(2);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      std::unique_ptr<Client> client = AttachOrDie(daemon);
      absl::StatusOr<std::unique_ptr<Communicator>> comm = client->Join(*token, rank, 2);
      ASSERT_TRUE(comm.ok()) << comm.status();
      absl::StatusOr<Buffer> buffer = client->AllocBuffer(3 * sizeof(int64_t));
      ASSERT_TRUE(buffer.ok());
      std::span<int64_t> values = buffer->span<int64_t>();
      for (int i = 0; i < 3; ++i) values[i] = (rank + 1) * (i + 1);
      ASSERT_TRUE((*comm)->Allreduce(*buffer, *buffer, 3, DataType::kInt64, ReduceOp::kSum).ok());
      results[rank].assign(values.begin(), values.end());
      if (rank == 1) values[0] = 99;
      ASSERT_TRUE((*comm)->Bcast(*buffer, 0, 1, DataType::kInt64, 1).ok());
      results[rank].push_back(values[0]);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  for (const std::vector<int64_t>& result : results) {
    EXPECT_EQ(result, (std::vector<int64_t>{3, 6, 9, 99}));
  }
}

TEST(ClientTest, RequestWaitTimesOutAndStaysValid) {
  FakeDaemon daemon;
  Pair pair = JoinPair(daemon);
  absl::StatusOr<Buffer> in = pair.clients[0]->AllocBuffer(16);
  absl::StatusOr<Buffer> out = pair.clients[1]->AllocBuffer(16);
  ASSERT_TRUE(in.ok() && out.ok());
  absl::StatusOr<Request> receive = pair.comms[0]->RecvAsync(*in, 8, 2, DataType::kInt32, 1, 3);
  ASSERT_TRUE(receive.ok()) << receive.status();

  EXPECT_EQ(receive->Wait(absl::Milliseconds(50)).code(), absl::StatusCode::kDeadlineExceeded);
  absl::StatusOr<bool> done = receive->Test();
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  EXPECT_FALSE(receive->done());

  out->span<int32_t>()[0] = 42;
  out->span<int32_t>()[1] = 43;
  ASSERT_TRUE(pair.comms[1]->Send(*out, 0, 2, DataType::kInt32, 0, 3).ok());
  EXPECT_TRUE(receive->Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(in->span<int32_t>()[2], 42);
  EXPECT_EQ(in->span<int32_t>()[3], 43);
  EXPECT_EQ(receive->algorithm(), "fake");
  EXPECT_GT(receive->elapsed(), absl::ZeroDuration());
  done = receive->Test();
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done);
  EXPECT_TRUE(receive->Wait().ok());
}

TEST(ClientTest, FailedOpReportsTheDaemonsError) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(16);
  ASSERT_TRUE(buffer.ok());
  absl::Status status = comm->Allreduce(*buffer, *buffer, 4, DataType::kFloat32, ReduceOp::kSum,
                                        {.algorithm = "fail"});
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(status.message(), "op failed as asked");

  absl::StatusOr<Request> request =
      comm->BcastAsync(*buffer, 0, 4, DataType::kFloat32, 0, {.algorithm = "fail"});
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(request->Test().status().code(), absl::StatusCode::kAborted);
}

TEST(ClientTest, RangeOutsideTheBufferFailsBeforeSubmitting) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(16);
  ASSERT_TRUE(buffer.ok());
  absl::Status status = comm->Send(*buffer, 8, 3, DataType::kInt32, 0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("12 bytes at offset 8"), absl::string_view::npos) << status;
  status = comm->Recv(*buffer, 0, uint64_t{1} << 62, DataType::kInt64, 0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(ClientTest, DestroyedCommunicatorRefusesOps) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
  std::unique_ptr<Communicator> comm = JoinAlone(*client);
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(16);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(comm->Destroy().ok());
  EXPECT_EQ(comm->Bcast(*buffer, 0, 1, DataType::kInt8, 0).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ClientTest, JoinTimesOutWhenRanksAreMissing) {
  FakeDaemon daemon;
  std::unique_ptr<Client> client = AttachOrDie(daemon);
  absl::StatusOr<std::string> token = client->CreateCommunicatorId();
  ASSERT_TRUE(token.ok());
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      client->Join(*token, 0, 2, absl::Milliseconds(50));
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(comm.status().message().find("JoinCommunicator: "), absl::string_view::npos);
}

}  // namespace
}  // namespace cclo
