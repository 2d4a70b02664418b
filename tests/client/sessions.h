// libcclo sessions for tests against a real cclod: attached clients and communicators of
// one or two ranks, failing the test (not aborting it) when the daemon refuses.
#pragma once

#include <memory>
#include <string>

#include "cclo/client.h"

namespace cclo::testing {

/// A client attached to the daemon in `runtime_dir`; nullptr (and a test failure) if the
/// attach fails.
std::unique_ptr<Client> AttachOrDie(const std::string& runtime_dir);

/// A communicator of one rank on `client`.
std::unique_ptr<Communicator> JoinAlone(Client& client);

/// Two sessions on one daemon joined as ranks 0 and 1 of one communicator.
struct Pair {
  std::unique_ptr<Client> clients[2];
  std::unique_ptr<Communicator> comms[2];
};

/// Attaches two clients to the daemon in `runtime_dir` and joins them as a Pair.
Pair JoinPair(const std::string& runtime_dir);

}  // namespace cclo::testing
