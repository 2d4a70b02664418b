#include "tests/e2e/alone.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace cclo::testing {

void AttachAlone(const Daemon& daemon, std::unique_ptr<Client>* client,
                 std::unique_ptr<Communicator>* comm) {
  absl::StatusOr<std::unique_ptr<Client>> attached = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(attached.ok()) << attached.status();
  absl::StatusOr<std::string> token = (*attached)->CreateCommunicatorId();
  ASSERT_TRUE(token.ok()) << token.status();
  absl::StatusOr<std::unique_ptr<Communicator>> joined = (*attached)->Join(*token, 0, 1);
  ASSERT_TRUE(joined.ok()) << joined.status();
  *client = *std::move(attached);
  *comm = *std::move(joined);
}

}  // namespace cclo::testing
