// Small cryptographic and byte helpers over OpenSSL: random bytes, HMAC-SHA256,
// constant-time comparison, hex. The one place cclod calls OpenSSL's primitives.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace cclo::hw {

using Digest = std::array<uint8_t, 32>;

/// Fills `out` with cryptographically random bytes; aborts if the system has no entropy
/// (going on would hand out guessable secrets).
void RandomBytes(uint8_t* out, size_t size);

/// HMAC-SHA256 of `message` keyed by `key`.
Digest Hmac(const uint8_t* key, size_t key_size, const void* message, size_t message_size);

/// Compares `size` bytes in constant time.
bool ConstantTimeEqual(const void* a, const void* b, size_t size);

/// Lower-case hex of bytes.
std::string Hex(const uint8_t* data, size_t size);

/// Parses lower- or upper-case hex into exactly `size` bytes.
absl::Status ParseHex(const std::string& text, uint8_t* out, size_t size);

}  // namespace cclo::hw
