#include "daemon/token.h"

#include "absl/strings/str_cat.h"
#include "hw/crypto.h"

namespace cclo::daemon {
namespace {

constexpr char kPrefix[] = "cclo1-";
constexpr size_t kPrefixSize = sizeof(kPrefix) - 1;
constexpr size_t kIdDigits = 2 * sizeof(hw::CommId);
constexpr size_t kSecretDigits = 2 * sizeof(hw::CommSecret);

absl::Status Malformed(const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("malformed communicator token: ", why));
}

}  // namespace

absl::StatusOr<hw::CommId> CommIdFromBytes(const std::string& bytes) {
  hw::CommId id{};
  if (bytes.size() != id.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm_id has ", bytes.size(), " bytes, expected ", id.size()));
  }
  std::copy(bytes.begin(), bytes.end(), id.begin());
  return id;
}

std::string Proof(const hw::CommSecret& secret, const std::string& message) {
  hw::Digest digest = hw::Hmac(secret.data(), secret.size(), message.data(), message.size());
  return std::string(digest.begin(), digest.end());
}

bool ProofMatches(const hw::CommSecret& secret, const std::string& message,
                  const std::string& proof) {
  const std::string expected = Proof(secret, message);
  return proof.size() == expected.size() &&
         hw::ConstantTimeEqual(proof.data(), expected.data(), expected.size());
}

CommToken NewToken(const std::string& root_address) {
  CommToken token;
  hw::RandomBytes(token.id.data(), token.id.size());
  hw::RandomBytes(token.secret.data(), token.secret.size());
  token.root_address = root_address;
  return token;
}

std::string FormatToken(const CommToken& token) {
  return absl::StrCat(kPrefix, hw::Hex(token.id.data(), token.id.size()), "-",
                      hw::Hex(token.secret.data(), token.secret.size()), "-", token.root_address);
}

absl::StatusOr<CommToken> ParseToken(const std::string& text) {
  if (text.compare(0, kPrefixSize, kPrefix) != 0) {
    if (text.rfind("cclo", 0) == 0) return Malformed("unsupported version (expected cclo1-)");
    return Malformed("does not start with 'cclo1-'");
  }
  const size_t id_end = kPrefixSize + kIdDigits;
  const size_t secret_end = id_end + 1 + kSecretDigits;
  if (text.size() < secret_end + 2 || text[id_end] != '-' || text[secret_end] != '-') {
    return Malformed(absl::StrCat("expected ", kIdDigits, " hex digits, '-', ", kSecretDigits,
                                  " hex digits, '-', address; got ", text.size(), " characters"));
  }
  CommToken token;
  if (absl::Status status =
          hw::ParseHex(text.substr(kPrefixSize, kIdDigits), token.id.data(), token.id.size());
      !status.ok()) {
    return Malformed(absl::StrCat("communicator id: ", status.message()));
  }
  if (!hw::ParseHex(text.substr(id_end + 1, kSecretDigits), token.secret.data(),
                    token.secret.size())
           .ok()) {
    return Malformed("secret is not hex");
  }
  token.root_address = text.substr(secret_end + 1);
  if (absl::Status address = hw::CheckHostPort(token.root_address); !address.ok()) {
    return Malformed(absl::StrCat("root ", address.message()));
  }
  return token;
}

}  // namespace cclo::daemon
