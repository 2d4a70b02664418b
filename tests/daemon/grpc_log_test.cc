// gRPC's log lines in cclod's log, and the line of a listener that stopped accepting passed
// on to whoever serves that port again (daemon/peer_server).
#include "daemon/grpc_log.h"

#include <grpc/support/log.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

class GrpcLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::ostream_sink_st>(log_)));
    ForwardGrpcLogs();
  }
  void TearDown() override {
    OnListenerStopped(nullptr);
    StopForwardingGrpcLogs();
  }

  std::ostringstream log_;
};

TEST_F(GrpcLogTest, AStoppedListenersLineIsLoggedAndPassedOnWithItsReason) {
  std::vector<std::string> reasons;
  OnListenerStopped([&reasons](const std::string& reason) { reasons.push_back(reason); });
  gpr_log(GPR_ERROR, "Failed accept4: %s", "Too many open files");
  gpr_log(GPR_ERROR, "Failed to add port: %s", "Failed accept4: no");
  EXPECT_EQ(reasons, std::vector<std::string>{"Too many open files"});
  EXPECT_NE(log_.str().find("] grpc: grpc_log_test.cc:"), std::string::npos) << log_.str();
  EXPECT_NE(log_.str().find(": Failed accept4: Too many open files\n"), std::string::npos)
      << log_.str();

  OnListenerStopped(nullptr);
  gpr_log(GPR_ERROR, "Failed accept4: %s", "Cannot allocate memory");
  EXPECT_EQ(reasons.size(), 1u);
  EXPECT_NE(log_.str().find(": Failed accept4: Cannot allocate memory\n"), std::string::npos)
      << log_.str();
}

}  // namespace
}  // namespace cclo::daemon
