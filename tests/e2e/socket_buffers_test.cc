// Socket buffers of data sessions between real daemons: left to the kernel on a path its
// autotuning covers (loopback at the default link rate), set to twice the bandwidth-delay
// product where it does not (loopback at a fictitious 100 Tb/s). What the kernel then
// holds is checked on sockets of its own by tests/hw/poe/tcp:socket_buffers_test. Their
// congestion control: the one data_tcp_congestion names (checked on the sockets by
// tests/hw/poe/tcp:congestion_test), and no start with one the kernel lacks.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

/// Ranks 0 and 1 of a new communicator rooted at `a`, on daemons a and b: one send/recv.
void RunPair(const Daemon& a, const Daemon& b) {
  const std::string token = NewToken(a);
  std::vector<std::vector<std::string>> commands;
  for (const Daemon* daemon : {&a, &b}) {
    commands.push_back({Runfile("client/cclo-run"), "run", "--runtime-dir", daemon->runtime_dir(),
                        "--token", token, "--rank", absl::StrCat(commands.size()), "--size", "2",
                        "--ops", "sendrecv", "--sizes", "1M"});
  }
  for (const ProcessResult& result : RunAll(commands, absl::Minutes(1))) {
    EXPECT_EQ(result.exit_code, 0) << result.output;
  }
}

/// Expects `daemon` to have logged the sizing of its data session's send buffer at
/// 100 Tb/s (loopback's round trip times that rate is beyond the send limit): set to at
/// most the wanted size, with a warning where the system's maximum held it back, or left
/// to autotuning where that maximum would only have shrunk it.
void ExpectSized(Daemon& daemon) {
  static const std::regex kSizing(
      "round trip [^;]+; twice the bandwidth-delay product at 100000 Gb/s is ([0-9]+) "
      "bytes; (send buffer set to ([0-9]+) bytes(, short of it: raise net.core.wmem_max or "
      "give cclod CAP_NET_ADMIN)?|send buffer left to autotuning \\(up to ([0-9]+)\\): "
      "net.core.wmem_max allows no more; raise it or give cclod CAP_NET_ADMIN); (receive: "
      "autotuning reaches it|receive window at most [0-9]+ bytes)");
  ASSERT_TRUE(daemon.process().WaitForOutput("bandwidth-delay product", absl::Seconds(10)))
      << daemon.process().Output();
  const std::string log = daemon.process().Output();
  std::smatch match;
  ASSERT_TRUE(std::regex_search(log, match, kSizing)) << log;
  uint64_t wanted = 0;
  ASSERT_TRUE(absl::SimpleAtoi(match[1].str(), &wanted)) << match[0];
  uint64_t bytes = 0;
  if (match[3].matched) {
    ASSERT_TRUE(absl::SimpleAtoi(match[3].str(), &bytes)) << match[0];
    EXPECT_GT(bytes, 0u) << match[0];
    EXPECT_LE(bytes, wanted) << match[0];
    EXPECT_EQ(match[4].matched, bytes < wanted) << match[0];
  } else {
    ASSERT_TRUE(absl::SimpleAtoi(match[5].str(), &bytes)) << match[0];
    EXPECT_LT(bytes, wanted) << match[0];
  }
}

TEST(SocketBuffersTest, LoopbackAtTheDefaultLinkRateIsLeftToTheKernel) {
  Daemon a, b;
  RunPair(a, b);
  for (Daemon* daemon : {&a, &b}) {
    EXPECT_EQ(daemon->process().Output().find("bandwidth-delay product"), std::string::npos)
        << daemon->process().Output();
  }
}

TEST(SocketBuffersTest, APathBeyondTheSendLimitIsSizedOnBothDaemons) {
  Daemon a("data_link_gbps: 100000\n"), b("data_link_gbps: 100000\n");
  RunPair(a, b);
  ExpectSized(a);
  ExpectSized(b);
}

TEST(SocketBuffersTest, DaemonsWithAnotherCongestionControlStillExchangeData) {
  Daemon a("data_tcp_congestion: reno\n"), b("data_tcp_congestion: reno\n");
  RunPair(a, b);
}

TEST(SocketBuffersTest, ACongestionControlTheKernelLacksStopsTheStart) {
  ProcessResult result = RunCclod("data_tcp_congestion: no_such_cc\n");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(
      absl::StrContains(result.output,
                        "cclod cannot start: TCP congestion control 'no_such_cc': this "
                        "kernel does not offer it (not built in or not loaded; it offers: "))
      << result.output;
}

}  // namespace
}  // namespace cclo::testing
