// Test certificates, made at test time with the openssl command: certificate authorities
// and, signed by them, daemon certificates for 127.0.0.1 (the address e2e daemons use).
#pragma once

#include <string>

namespace cclo::testing {

/// A daemon's certificate and private key (PEM files).
struct TestCert {
  std::string cert_file;
  std::string key_file;
};

class TestCa {
 public:
  /// A new self-signed CA with common name `name`, its files in `dir`; aborts the test
  /// process if openssl fails.
  TestCa(const std::string& dir, const std::string& name);

  /// A certificate for IP 127.0.0.1 (server and client use) with common name `name`,
  /// signed by this CA.
  TestCert Issue(const std::string& name) const;

  const std::string& cert_file() const { return cert_file_; }

 private:
  std::string dir_;
  std::string cert_file_;
  std::string key_file_;
};

/// The cclod config lines of a daemon presenting `cert` and trusting `ca`.
std::string PeerTlsConfig(const TestCert& cert, const TestCa& ca);

}  // namespace cclo::testing
