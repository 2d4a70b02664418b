// libcclo sessions for tests against a real cclod: attached clients and communicators of
// one or two ranks. Each ends the test binary, naming the call and its error, when the
// daemon refuses: the tests go on to use what they return.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "cclo/client.h"

namespace cclo::testing {

/// A client attached to the daemon in `runtime_dir`.
std::unique_ptr<Client> AttachOrDie(const std::string& runtime_dir);

/// A communicator of one rank on `client`.
std::unique_ptr<Communicator> JoinAlone(Client& client);

/// Sessions joined as ranks 0 to N-1 of one communicator, N the size.
struct Group {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::unique_ptr<Communicator>> comms;
};

/// Attaches one client to the daemon in each of `runtime_dirs` (rank R to the R-th) and
/// joins them as a Group.
Group JoinGroup(const std::vector<std::string>& runtime_dirs);

/// Two sessions on one daemon joined as ranks 0 and 1 of one communicator.
using Pair = Group;

/// Attaches two clients to the daemon in `runtime_dir` and joins them as a Pair.
Pair JoinPair(const std::string& runtime_dir);

/// A runtime dir of its own whose attach.sock is the daemon's in `daemon_runtime_dir` and
/// whose client.sock is `service`, served here until this goes (the dir with it): libcclo
/// attaches to that daemon and makes its gRPC calls to `service`. Destroy the clients first.
class StandInClientSocket {
 public:
  StandInClientSocket(const std::string& daemon_runtime_dir, grpc::Service& service);
  ~StandInClientSocket();
  StandInClientSocket(const StandInClientSocket&) = delete;
  StandInClientSocket& operator=(const StandInClientSocket&) = delete;

  /// The runtime dir to attach to.
  const std::string& runtime_dir() const { return runtime_dir_; }

 private:
  std::string runtime_dir_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace cclo::testing
