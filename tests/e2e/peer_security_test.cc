// Peer security across real daemons: mutual TLS on the Peer service (on, off, and a daemon
// whose certificate comes from another CA), communicator secrets proved on joins and on
// data sessions, debug logs that never show a secret, a token or key material, and a
// refused join's address logged cut short.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "daemon/token.h"
#include "hw/crypto.h"
#include "hw/types.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"
#include "tests/e2e/test_certs.h"
#include "tests/hw/emu/fake_peer.h"

namespace cclo::testing {
namespace {

/// Ranks 0 and 1 of `token`'s communicator on daemons a and b (cclo-run clients), through
/// every collective; both must succeed.
void RunPair(const Daemon& a, const Daemon& b, const std::string& token) {
  std::vector<std::vector<std::string>> commands;
  for (const Daemon* daemon : {&a, &b}) {
    commands.push_back({Runfile("client/cclo-run"), "run", "--runtime-dir", daemon->runtime_dir(),
                        "--token", token, "--rank", absl::StrCat(commands.size()), "--size", "2",
                        "--ops", "all", "--sizes", "4,64K,1M"});
  }
  std::vector<ProcessResult> results = RunAll(commands, absl::Minutes(3));
  for (size_t rank = 0; rank < results.size(); ++rank) {
    EXPECT_FALSE(results[rank].timed_out) << "rank " << rank;
    EXPECT_EQ(results[rank].exit_code, 0) << "rank " << rank << ":\n" << results[rank].output;
  }
}

/// `token` with the first digit of its secret changed.
std::string WithWrongSecret(std::string token) {
  const size_t secret = 6 + 32 + 1;  // "cclo1-", the id, "-"
  token[secret] = token[secret] == '0' ? '1' : '0';
  return token;
}

/// Expects `daemon` to log `text` (waiting for its output for up to 20 s).
void ExpectLogged(Daemon& daemon, const std::string& text) {
  EXPECT_TRUE(daemon.process().WaitForOutput(text, absl::Seconds(20)))
      << "no '" << text << "' in:\n"
      << daemon.process().Output();
}

/// Stops `daemon` (SIGTERM) and returns everything it logged.
std::string StopAndLog(Daemon& daemon) {
  daemon.process().Signal(SIGTERM);
  ProcessResult stopped = daemon.process().Wait(absl::Seconds(20));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  return stopped.output;
}

class PeerSecurityTest : public ::testing::Test {
 protected:
  PeerSecurityTest() : dir_(NewDir()), ca_(dir_, "cluster-ca"), other_ca_(dir_, "other-ca") {}
  ~PeerSecurityTest() override { std::filesystem::remove_all(dir_); }

  /// Config of a daemon presenting a certificate `name` from the cluster CA.
  std::string ClusterTls(const std::string& name) { return PeerTlsConfig(ca_.Issue(name), ca_); }

  /// Runs cclod with `extra_config` (and free ports) until it exits (at most 30 s).
  ProcessResult StartDaemon(const std::string& extra_config) {
    const std::string config = dir_ + "/cclod.yaml";
    std::ofstream(config) << "runtime_dir: " << dir_ << "/run\npeer_port: 0\ndata_port: 0\n"
                          << "metrics_port: 0\n"
                          << extra_config;
    return Process({Runfile("daemon/cclod"), "--config", config}).Wait(absl::Seconds(30));
  }

  const std::string dir_;
  const TestCa ca_;
  const TestCa other_ca_;

 private:
  static std::string NewDir() {
    char dir[] = "/tmp/cclo-tls.XXXXXX";
    return mkdtemp(dir);
  }
};

TEST_F(PeerSecurityTest, MutualTlsCarriesCollectives) {
  Daemon a(ClusterTls("a")), b(ClusterTls("b"));
  for (Daemon* daemon : {&a, &b}) ExpectLogged(*daemon, "peer service: mutual TLS");
  RunPair(a, b, NewToken(a));
}

TEST_F(PeerSecurityTest, PlaintextCarriesCollectives) {
  Daemon a, b;
  for (Daemon* daemon : {&a, &b}) ExpectLogged(*daemon, "peer service: plaintext");
  RunPair(a, b, NewToken(a));
}

TEST_F(PeerSecurityTest, DaemonOfAnotherCaIsRefusedOnBothSides) {
  Daemon a(ClusterTls("a"));
  Daemon c(PeerTlsConfig(other_ca_.Issue("c"), other_ca_));
  RawSession rank0(a.runtime_dir()), rank1(c.runtime_dir());
  // c's rank joins at a: c finds a's certificate not signed by its CA and hangs up; the
  // join fails at once (UNAVAILABLE, not at its deadline), naming a and the reason.
  grpc::Status joined = rank1.Join(rank0.NewToken(), 1, 2);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_NE(joined.error_message().find("join at root daemon " + a.peer_address() + " failed"),
            std::string::npos)
      << joined.error_message();
  EXPECT_NE(joined.error_message().find("certificate verify failed"), std::string::npos)
      << joined.error_message();
  ExpectLogged(c, "join as rank 1 of 2 failed: join at root daemon " + a.peer_address());
  ExpectLogged(a, "TLS handshake on the peer port failed");
}

TEST_F(PeerSecurityTest, DaemonWithoutTlsIsRefusedByATlsRoot) {
  Daemon a(ClusterTls("a"));
  Daemon plain;
  RawSession rank0(a.runtime_dir()), rank1(plain.runtime_dir());
  grpc::Status joined = rank1.Join(rank0.NewToken(), 1, 2);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_NE(joined.error_message().find("join at root daemon " + a.peer_address() + " failed"),
            std::string::npos)
      << joined.error_message();
  ExpectLogged(plain, "join as rank 1 of 2 failed: join at root daemon " + a.peer_address());
  ExpectLogged(a, "TLS handshake on the peer port failed");
}

TEST_F(PeerSecurityTest, WrongSecretIsRefusedByTheRootOnBothSides) {
  Daemon a(ClusterTls("a")), b(ClusterTls("b"));
  RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir());
  grpc::Status joined = rank1.Join(WithWrongSecret(rank0.NewToken()), 1, 2);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::PERMISSION_DENIED) << joined.error_message();
  EXPECT_NE(joined.error_message().find("join at root daemon " + a.peer_address() + " failed"),
            std::string::npos)
      << joined.error_message();
  EXPECT_NE(joined.error_message().find("token secret mismatch"), std::string::npos)
      << joined.error_message();
  ExpectLogged(a, "join of rank 1 from peer daemon " + b.peer_address());
  ExpectLogged(a, ", certificate CN=b) refused: join proof for communicator ");
  ExpectLogged(b, "join as rank 1 of 2 failed: join at root daemon " + a.peer_address() +
                      " failed: join proof for communicator ");
}

TEST_F(PeerSecurityTest, BadTlsFilesStopTheDaemonAtStartNamingKeyAndPath) {
  const TestCert a = ca_.Issue("a"), b = ca_.Issue("b");
  const std::string missing = dir_ + "/missing.key";
  ProcessResult result = StartDaemon(PeerTlsConfig({a.cert_file, missing}, ca_));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(
      result.output.find("cclod cannot start: config key 'peer_tls_key_file': cannot read file " +
                         missing + ": No such file or directory"),
      std::string::npos)
      << result.output;

  result = StartDaemon(PeerTlsConfig({a.cert_file, b.key_file}, ca_));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(
      result.output.find("cclod cannot start: config key 'peer_tls_key_file': '" + b.key_file +
                         "' is not the private key of the certificate in '" + a.cert_file + "'"),
      std::string::npos)
      << result.output;

  result = StartDaemon("peer_tls_ca_file: " + ca_.cert_file() + "\n");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("peer_tls_ca_file is '" + ca_.cert_file() +
                               "' but peer_tls_cert_file and peer_tls_key_file are not set"),
            std::string::npos)
      << result.output;
}

TEST_F(PeerSecurityTest, DataSessionWithAWrongSecretIsRefused) {
  Daemon a;
  RawSession session(a.runtime_dir());
  const std::string token = session.NewToken();
  uint64_t handle = 0;
  grpc::Status joined = session.Join(token, 0, 1, &handle);
  ASSERT_TRUE(joined.ok()) << joined.error_message();
  absl::StatusOr<daemon::CommToken> parsed = daemon::ParseToken(token);
  ASSERT_TRUE(parsed.ok()) << parsed.status();

  // A peer engine that knows the communicator's id but not its secret.
  hw::emu::testing::TestComm comm;
  comm.config.id = parsed->id;
  comm.config.secret = parsed->secret;
  hw::emu::testing::FakePeer peer(a.data_address(), comm);
  hw::CommSecret wrong = parsed->secret;
  wrong[0] ^= 1;
  peer.Authenticate(wrong);
  absl::StatusOr<hw::poe::ControlMessage> refusal = peer.ReadControl();
  ASSERT_TRUE(refusal.ok()) << refusal.status();
  EXPECT_EQ(refusal->kind, hw::poe::ControlKind::kRefuse);
  EXPECT_NE(refusal->reason.find("authentication failed"), std::string::npos) << refusal->reason;
  const std::string logged =
      absl::StrCat("refusing data session with ", hw::emu::testing::kFakeAddress,
                   " for communicator ", hw::CommIdHex(parsed->id), ": authentication failed");
  EXPECT_TRUE(a.process().WaitForOutput(logged, absl::Seconds(20))) << a.process().Output();

  // The communicator itself is unharmed.
  grpc::Status ran = session.Run(AllreduceRequest(handle, session.Alloc(4096), 1024));
  EXPECT_TRUE(ran.ok()) << ran.error_message();
}

TEST_F(PeerSecurityTest, AHugeAddressInARefusedJoinIsLoggedCut) {
  Daemon a;
  const std::string address(1 << 20, '7');
  grpc::Status joined = ForeignPeerJoin(a.peer_address(), address);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::NOT_FOUND) << joined.error_message();
  const std::string log = StopAndLog(a);
  const std::string logged = "join of rank 0 from peer daemon " +
                             address.substr(0, hw::kMaxEscapedBytes) +
                             "... (1048576 bytes in all) (";
  const size_t found = log.find(logged);
  ASSERT_NE(found, std::string::npos) << "no refusal of the join in " << log.size() << " bytes";
  const size_t start = log.rfind('\n', found) + 1;
  EXPECT_LT(log.find('\n', found) - start, 1024u) << log.substr(start, 1024);
  // Nothing else logged the address either.
  EXPECT_LT(log.size(), address.size());
}

TEST_F(PeerSecurityTest, DebugLogsShowNoSecretTokenOrKeyMaterial) {
  const TestCert cert_a = ca_.Issue("a"), cert_b = ca_.Issue("b");
  Daemon a(PeerTlsConfig(cert_a, ca_)), b(PeerTlsConfig(cert_b, ca_));
  // A whole communicator lifecycle (token, joins, every collective, destroy), then a join
  // with a wrong secret, so that the refusal paths log too.
  const std::string token = NewToken(a);
  RunPair(a, b, token);
  const std::string intruder_token = NewToken(a);
  {
    RawSession intruder(b.runtime_dir());
    EXPECT_FALSE(intruder.Join(WithWrongSecret(intruder_token), 1, 2).ok());
  }
  std::vector<std::string> secrets;
  for (const std::string& text : {token, intruder_token, WithWrongSecret(intruder_token)}) {
    absl::StatusOr<daemon::CommToken> parsed = daemon::ParseToken(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const std::string hex = hw::Hex(parsed->secret.data(), parsed->secret.size());
    secrets.push_back(hex);
    secrets.push_back(absl::AsciiStrToUpper(hex));
  }
  for (auto [daemon, cert] : {std::pair{&a, cert_a}, std::pair{&b, cert_b}}) {
    const std::string log = StopAndLog(*daemon);
    EXPECT_NE(log.find("[debug]"), std::string::npos) << "not at debug level:\n" << log;
    EXPECT_NE(log.find("joined communicator"), std::string::npos) << log;
    for (const std::string& secret : secrets) {
      EXPECT_EQ(log.find(secret), std::string::npos) << "secret " << secret << " logged";
    }
    std::ifstream key(cert.key_file);
    for (std::string line; std::getline(key, line);) {
      if (line.rfind("-----", 0) == 0) continue;
      EXPECT_EQ(log.find(line), std::string::npos) << "key material logged: " << line;
    }
  }
}

}  // namespace
}  // namespace cclo::testing
