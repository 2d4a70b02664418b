// LoadPeerTls's errors; loading real certificates is tested with real daemons in
// tests/e2e/peer_security_test.cc.
#include "daemon/peer_tls.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace cclo::daemon {
namespace {

/// A file under the test's temporary dir holding `text`; returns its path.
std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

Config TlsConfig(const std::string& cert, const std::string& key, const std::string& ca) {
  Config config;
  config.peer_tls_cert_file = cert;
  config.peer_tls_key_file = key;
  config.peer_tls_ca_file = ca;
  return config;
}

const char kPem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

TEST(PeerTlsTest, NoKeysMeansPlaintext) {
  absl::StatusOr<std::optional<PeerTls>> tls = LoadPeerTls(Config{});
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE(tls->has_value());
}

TEST(PeerTlsTest, UnreadableFileNamesKeyAndPath) {
  const std::string pem = WriteFile("good.pem", kPem);
  absl::StatusOr<std::optional<PeerTls>> tls =
      LoadPeerTls(TlsConfig(pem, "/nonexistent/node.key", pem));
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tls.status().message(),
            "config key 'peer_tls_key_file': cannot read file /nonexistent/node.key: No such "
            "file or directory");
}

TEST(PeerTlsTest, FileWithoutPemNamesKeyAndPath) {
  const std::string pem = WriteFile("good.pem", kPem);
  const std::string text = WriteFile("ca.txt", "not a certificate\n");
  absl::StatusOr<std::optional<PeerTls>> tls = LoadPeerTls(TlsConfig(pem, pem, text));
  ASSERT_FALSE(tls.ok());
  EXPECT_EQ(tls.status().message(),
            "config key 'peer_tls_ca_file': '" + text + "' holds no PEM block");
}

}  // namespace
}  // namespace cclo::daemon
