// Daemons on an IPv6 address: every "host:port" they give out has the address in
// brackets, so the other daemon's gRPC channel and engine parse it. Their metrics are
// served on IPv4: Debian's civetweb has no IPv6.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/pairs.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

TEST(Ipv6Test, DaemonsOnIpv6LoopbackJoinAndRunCollectives) {
  Daemon a("metrics_host: 127.0.0.1\n", {}, "::1"), b("metrics_host: 127.0.0.1\n", {}, "::1");
  EXPECT_TRUE(absl::StartsWith(a.peer_address(), "[::1]:")) << a.peer_address();
  EXPECT_TRUE(absl::StartsWith(a.data_address(), "[::1]:")) << a.data_address();
  EXPECT_TRUE(absl::StartsWith(a.metrics_address(), "127.0.0.1:")) << a.metrics_address();
  EXPECT_NE(Scrape(a).find("cclod_tenant_weight"), std::string::npos);
  const std::string token = NewToken(a);
  EXPECT_TRUE(absl::EndsWith(token, "-" + a.peer_address())) << token;
  RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  ExpectPairAllreduce(rank0, handle0, rank1, handle1);
}

TEST(Ipv6Test, MetricsOnAnIpv6AddressAreRefusedAtStartNamingTheKey) {
  const ProcessResult result = RunCclod("metrics_host: '::1'\n");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("cannot serve metrics on [::1]:0: the HTTP server (civetweb) was "
                               "built without IPv6; set metrics_host to an IPv4 address"),
            std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace cclo::testing
