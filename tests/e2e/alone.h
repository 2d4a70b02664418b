// A libcclo client of its own joined alone to a new communicator: the smallest thing that
// runs ops on a daemon.
#pragma once

#include <memory>

#include "cclo/client.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {

/// Attaches a client to `daemon` and joins it alone to a new communicator (a fatal test
/// failure where it cannot: call under ASSERT_NO_FATAL_FAILURE).
void AttachAlone(const Daemon& daemon, std::unique_ptr<Client>* client,
                 std::unique_ptr<Communicator>* comm);

}  // namespace cclo::testing
