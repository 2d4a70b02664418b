#include "tests/client/sessions.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

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

StandInClientSocket::StandInClientSocket(const std::string& daemon_runtime_dir,
                                         grpc::Service& service) {
  char dir[] = "/tmp/cclo.XXXXXX";
  if (mkdtemp(dir) == nullptr || symlink((daemon_runtime_dir + "/attach.sock").c_str(),
                                         absl::StrCat(dir, "/attach.sock").c_str()) != 0) {
    std::perror("stand-in runtime dir");
    std::abort();
  }
  runtime_dir_ = dir;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", runtime_dir_, "/client.sock"),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    std::fprintf(stderr, "cannot serve %s/client.sock\n", runtime_dir_.c_str());
    std::abort();
  }
}

StandInClientSocket::~StandInClientSocket() {
  server_->Shutdown();
  std::filesystem::remove_all(runtime_dir_);
}

}  // namespace cclo::testing
