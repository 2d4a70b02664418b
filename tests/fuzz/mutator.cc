#include "tests/fuzz/mutator.h"

#include <algorithm>

namespace cclo::testing {

void Mutator::Fill(void* data, size_t size) {
  auto* bytes = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(Any());
}

void Mutator::FlipBytes(void* data, size_t size) {
  auto* bytes = static_cast<uint8_t*>(data);
  for (uint64_t k = 0, flips = 1 + Below(3); k < flips; ++k) {
    bytes[Below(size)] = static_cast<uint8_t>(OneIn(2) ? Any() : Below(3));
  }
}

void Mutator::EditText(std::string& text, const std::vector<std::string>& tokens) {
  for (uint64_t k = 0, edits = 1 + Below(3); k < edits; ++k) {
    const size_t at = Below(text.size() + 1);
    const size_t length = std::min<size_t>(text.size() - at, 1 + Below(16));
    switch (Below(6)) {
      case 0:  // a byte removed
        if (at < text.size()) text.erase(at, 1);
        break;
      case 1:  // a byte doubled
        if (at < text.size()) text.insert(at, 1, text[at]);
        break;
      case 2:  // a byte replaced by any byte
        if (at < text.size()) text[at] = static_cast<char>(Any());
        break;
      case 3:  // a run cut out
        text.erase(at, length);
        break;
      case 4:  // a run repeated
        text.insert(at, text.substr(at, length));
        break;
      default: {  // a token, or one byte of one (YAML's punctuation, say)
        const std::string& token = Pick(tokens);
        if (OneIn(4) && !token.empty()) {
          text.insert(at, 1, token[Below(token.size())]);
        } else {
          text.insert(at, token);
        }
      }
    }
  }
}

std::vector<std::string> Mutator::YamlTokens(const std::vector<std::string>& words) {
  std::vector<std::string> tokens = {": ",     "- ", "{",   "}",  "[",      "]", ", ", "\n  ",
                                     "\n  - ", "#",  "&a ", "*a", "!!str ", "'", "\"", "|",
                                     "? ",     "~",  "0",   "9",  "-1",     "0x"};
  tokens.insert(tokens.end(), words.begin(), words.end());
  return tokens;
}

}  // namespace cclo::testing
