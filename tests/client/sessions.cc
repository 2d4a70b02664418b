#include "tests/client/sessions.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace cclo::testing {
namespace {

// What `made` holds, or ends the test binary naming `what` and why: a test goes on to use it.
template <typename T>
T OrDie(absl::StatusOr<T> made, const char* what) {
  if (!made.ok()) {
    std::fprintf(stderr, "%s failed: %s\n", what, made.status().ToString().c_str());
    std::abort();
  }
  return *std::move(made);
}

}  // namespace

std::unique_ptr<Client> AttachOrDie(const std::string& runtime_dir) {
  return OrDie(Client::Attach(runtime_dir), "Attach");
}

std::unique_ptr<Communicator> JoinAlone(Client& client) {
  const std::string token = OrDie(client.CreateCommunicatorId(), "CreateCommunicatorId");
  return OrDie(client.Join(token, 0, 1), "Join");
}

Pair JoinPair(const std::string& runtime_dir) {
  Pair pair;
  for (auto& client : pair.clients) client = AttachOrDie(runtime_dir);
  const std::string token = OrDie(pair.clients[0]->CreateCommunicatorId(), "CreateCommunicatorId");
  std::thread rank1([&] { pair.comms[1] = OrDie(pair.clients[1]->Join(token, 1, 2), "Join"); });
  pair.comms[0] = OrDie(pair.clients[0]->Join(token, 0, 2), "Join");
  rank1.join();
  return pair;
}

}  // namespace cclo::testing
