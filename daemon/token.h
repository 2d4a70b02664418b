// Communicator tokens: what CreateCommunicatorId returns and every rank passes to
// JoinCommunicator. Text form, version 1:
//
//   cclo1-<comm id, 32 hex digits>-<secret, 64 hex digits>-<root daemon peer address>
//
// The secret makes the token a credential: never log a whole token.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "hw/types.h"

namespace cclo::daemon {

struct CommToken {
  hw::CommId id{};
  hw::CommSecret secret{};
  std::string root_address;  ///< "host:port" of the root daemon's Peer service
};

/// A new token with a random id and secret rooted at `root_address`.
CommToken NewToken(const std::string& root_address);

std::string FormatToken(const CommToken& token);

/// A communicator id from its 16 raw bytes (as carried in Peer RPCs).
absl::StatusOr<hw::CommId> CommIdFromBytes(const std::string& bytes);

/// HMAC-SHA256 of `message` keyed by the communicator secret, as raw bytes: what Peer
/// RPCs carry to prove their sender holds the token.
std::string Proof(const hw::CommSecret& secret, const std::string& message);

/// Whether `proof` is Proof(secret, message), compared in constant time.
bool ProofMatches(const hw::CommSecret& secret, const std::string& message,
                  const std::string& proof);

/// Parses a token; malformed input is INVALID_ARGUMENT saying which part is wrong
/// (without echoing the secret).
absl::StatusOr<CommToken> ParseToken(const std::string& text);

}  // namespace cclo::daemon
