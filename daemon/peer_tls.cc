#include "daemon/peer_tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "hw/types.h"

namespace cclo::daemon {
namespace {

/// Refuses to prompt for a passphrase: an encrypted key simply does not load.
int NoPassphrase(char*, int, int, void*) { return 0; }

/// Whether the certificate and key parse and belong together, so that a wrong file is a
/// config error here rather than a failed listen deep in gRPC.
absl::Status CheckKeyPair(const Config& config, const PeerTls& tls) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_pem(
      BIO_new_mem_buf(tls.cert_chain.data(), static_cast<int>(tls.cert_chain.size())), BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_pem.get(), nullptr, NoPassphrase, nullptr), X509_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key_pem(
      BIO_new_mem_buf(tls.private_key.data(), static_cast<int>(tls.private_key.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_pem.get(), nullptr, NoPassphrase, nullptr), EVP_PKEY_free);
  const bool matches = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  if (!cert) {
    return absl::InvalidArgumentError(absl::StrCat("config key 'peer_tls_cert_file': '",
                                                   config.peer_tls_cert_file,
                                                   "' holds no readable certificate"));
  }
  if (!key) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key 'peer_tls_key_file': '", config.peer_tls_key_file,
                     "' holds no readable private key (or one with a passphrase)"));
  }
  if (!matches) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config key 'peer_tls_key_file': '", config.peer_tls_key_file,
        "' is not the private key of the certificate in '", config.peer_tls_cert_file, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPem(const char* key, const std::string& path) {
  absl::StatusOr<std::string> text = hw::ReadTextFile("file", path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key '", key, "': ", text.status().message()));
  }
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key '", key, "': '", path, "' holds no PEM block"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::optional<PeerTls>> LoadPeerTls(const Config& config) {
  if (config.peer_tls_cert_file.empty()) return std::nullopt;
  absl::StatusOr<std::string> cert = ReadPem("peer_tls_cert_file", config.peer_tls_cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("peer_tls_key_file", config.peer_tls_key_file);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> ca = ReadPem("peer_tls_ca_file", config.peer_tls_ca_file);
  if (!ca.ok()) return ca.status();
  PeerTls tls{*std::move(cert), *std::move(key), *std::move(ca)};
  if (absl::Status pair = CheckKeyPair(config, tls); !pair.ok()) return pair;
  return tls;
}

std::shared_ptr<grpc::ServerCredentials> PeerServerCredentials(const std::optional<PeerTls>& tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls->ca_certs;
  options.pem_key_cert_pairs.push_back({tls->private_key, tls->cert_chain});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> PeerChannelCredentials(
    const std::optional<PeerTls>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls->ca_certs;
  options.pem_private_key = tls->private_key;
  options.pem_cert_chain = tls->cert_chain;
  return grpc::SslCredentials(options);
}

}  // namespace cclo::daemon
