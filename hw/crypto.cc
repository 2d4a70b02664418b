#include "hw/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace cclo::hw {

void RandomBytes(uint8_t* out, size_t size) {
  if (RAND_bytes(out, static_cast<int>(size)) != 1) std::abort();  // no entropy: unsafe to go on
}

Digest Hmac(const uint8_t* key, size_t key_size, const void* message, size_t message_size) {
  Digest digest{};
  unsigned int length = 0;
  HMAC(EVP_sha256(), key, static_cast<int>(key_size),
       static_cast<const unsigned char*>(message), message_size, digest.data(), &length);
  return digest;
}

bool ConstantTimeEqual(const void* a, const void* b, size_t size) {
  return CRYPTO_memcmp(a, b, size) == 0;
}

std::string Hex(const uint8_t* data, size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 15]);
  }
  return out;
}

absl::Status ParseHex(const std::string& text, uint8_t* out, size_t size) {
  if (text.size() != 2 * size) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", 2 * size, " hex digits, got ", text.size()));
  }
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < size; ++i) {
    int high = nibble(text[2 * i]), low = nibble(text[2 * i + 1]);
    if (high < 0 || low < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text.substr(2 * i, 2), "' at position ", 2 * i, " is not hex"));
    }
    out[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return absl::OkStatus();
}

}  // namespace cclo::hw
