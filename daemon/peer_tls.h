// Mutual TLS on the Peer service: the PEM files the config names, read at start (a reload
// reads them only to check that the next start could), and the gRPC credentials made of
// them for the Peer server and for the Peer clients.
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/config.h"

namespace cclo::daemon {

/// The contents of the peer_tls_* files.
struct PeerTls {
  std::string cert_chain;   ///< this daemon's certificate (chain), PEM
  std::string private_key;  ///< its private key, PEM; key material, never logged
  std::string ca_certs;     ///< the CA bundle peers' certificates must chain to, PEM
};

/// Reads the peer_tls_* files; nullopt when the config sets none (ParseConfig has already
/// checked that they come all three or none). A file that cannot be read or holds no PEM
/// block, and a key that is not the certificate's, is INVALID_ARGUMENT naming the key and
/// the path.
absl::StatusOr<std::optional<PeerTls>> LoadPeerTls(const Config& config);

/// With `tls`: TLS that requires a client certificate chaining to the CA bundle and
/// refuses the connection otherwise. Without: plaintext.
std::shared_ptr<grpc::ServerCredentials> PeerServerCredentials(const std::optional<PeerTls>& tls);

/// With `tls`: TLS that presents this daemon's certificate and verifies the server's
/// against the CA bundle and the host it dials. Without: plaintext.
std::shared_ptr<grpc::ChannelCredentials> PeerChannelCredentials(const std::optional<PeerTls>& tls);

}  // namespace cclo::daemon
