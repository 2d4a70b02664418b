#include "tests/e2e/test_certs.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

/// Runs openssl with `args`; aborts if it fails.
void OpenSsl(const std::vector<std::string>& args) {
  std::vector<std::string> command = {"/usr/bin/openssl"};
  command.insert(command.end(), args.begin(), args.end());
  ProcessResult result = Process(command).Wait(absl::Seconds(60));
  if (result.exit_code != 0) {
    std::fprintf(stderr, "openssl %s failed:\n%s\n", args[0].c_str(), result.output.c_str());
    std::abort();
  }
}

/// The openssl options that make a new P-256 key without a passphrase into `key_file`.
std::vector<std::string> NewKey(const std::string& key_file) {
  return {"-newkey", "ec",      "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes",  "-keyout", key_file};
}

}  // namespace

TestCa::TestCa(const std::string& dir, const std::string& name)
    : dir_(dir), cert_file_(dir + "/" + name + ".pem"), key_file_(dir + "/" + name + ".key") {
  std::vector<std::string> args = {"req",   "-x509",       "-days", "2",
                                   "-subj", "/CN=" + name, "-out",  cert_file_};
  for (const std::string& arg : NewKey(key_file_)) args.push_back(arg);
  OpenSsl(args);
}

TestCert TestCa::Issue(const std::string& name) const {
  const std::string base = dir_ + "/" + name;
  TestCert cert{base + ".pem", base + ".key"};
  std::vector<std::string> request = {"req", "-new", "-subj", "/CN=" + name, "-out", base + ".csr"};
  for (const std::string& arg : NewKey(cert.key_file)) request.push_back(arg);
  OpenSsl(request);
  std::ofstream(base + ".ext") << "subjectAltName=IP:127.0.0.1\n"
                               << "extendedKeyUsage=serverAuth,clientAuth\n";
  OpenSsl({"x509", "-req", "-days", "2", "-in", base + ".csr", "-CA", cert_file_, "-CAkey",
           key_file_, "-CAcreateserial", "-extfile", base + ".ext", "-out", cert.cert_file});
  return cert;
}

std::string PeerTlsConfig(const TestCert& cert, const TestCa& ca) {
  return absl::StrCat("peer_tls_cert_file: ", cert.cert_file,
                      "\npeer_tls_key_file: ", cert.key_file,
                      "\npeer_tls_ca_file: ", ca.cert_file(), "\n");
}

}  // namespace cclo::testing
