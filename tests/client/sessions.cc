#include "tests/client/sessions.h"

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

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

Pair JoinPair(const std::string& runtime_dir) { return JoinGroup({runtime_dir, runtime_dir}); }

Group JoinGroup(const std::vector<std::string>& runtime_dirs) {
  const uint32_t size = static_cast<uint32_t>(runtime_dirs.size());
  Group group;
  for (const std::string& runtime_dir : runtime_dirs) {
    group.clients.push_back(AttachOrDie(runtime_dir));
  }
  const std::string token = OrDie(group.clients[0]->CreateCommunicatorId(), "CreateCommunicatorId");
  group.comms.resize(size);
  std::vector<std::thread> joins;
  for (uint32_t rank = 0; rank < size; ++rank) {
    joins.emplace_back([&, rank] {
      group.comms[rank] = OrDie(group.clients[rank]->Join(token, rank, size), "Join");
    });
  }
  for (std::thread& join : joins) join.join();
  return group;
}

}  // namespace cclo::testing
