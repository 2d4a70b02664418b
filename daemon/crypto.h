// Small cryptographic helpers over OpenSSL: random bytes, HMAC-SHA256, hex.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace cclo::daemon {

using Digest = std::array<uint8_t, 32>;

/// Fills `out` with cryptographically random bytes.
void RandomBytes(uint8_t* out, size_t size);

/// HMAC-SHA256 of `message` keyed by `key`.
Digest Hmac(const uint8_t* key, size_t key_size, const std::string& message);

/// Compares two digests in constant time.
bool DigestEqual(const std::string& a, const Digest& b);

/// Lower-case hex of bytes.
std::string Hex(const uint8_t* data, size_t size);

/// Parses lower- or upper-case hex into exactly `size` bytes.
absl::Status ParseHex(const std::string& text, uint8_t* out, size_t size);

}  // namespace cclo::daemon
