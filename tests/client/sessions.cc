#include "tests/client/sessions.h"

#include <thread>

#include "gtest/gtest.h"

namespace cclo::testing {

std::unique_ptr<Client> AttachOrDie(const std::string& runtime_dir) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(runtime_dir);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

std::unique_ptr<Communicator> JoinAlone(Client& client) {
  absl::StatusOr<std::string> token = client.CreateCommunicatorId();
  EXPECT_TRUE(token.ok()) << token.status();
  absl::StatusOr<std::unique_ptr<Communicator>> comm = client.Join(*token, 0, 1);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? *std::move(comm) : nullptr;
}

Pair JoinPair(const std::string& runtime_dir) {
  Pair pair;
  for (auto& client : pair.clients) client = AttachOrDie(runtime_dir);
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

}  // namespace cclo::testing
