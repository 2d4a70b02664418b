// Inputs for the parsers' random-input tests: a seeded generator, so that a failure
// repeats, and mutations of valid inputs, byte-wise for binary frames and slots and
// edit-wise for text. A test mutates valid inputs (to get past the first checks) and
// builds structure-aware variants of its own, then asserts what every accepted input
// satisfies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace cclo::testing {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : random_(seed) {}

  /// 64 random bits.
  uint64_t Any() { return random_(); }
  /// A number in [0, n), n > 0.
  uint64_t Below(uint64_t n) { return random_() % n; }
  /// True once in `n` calls on average.
  bool OneIn(uint64_t n) { return Below(n) == 0; }
  /// A copy of one of `items` (not empty).
  template <typename T>
  T Pick(const std::vector<T>& items) {
    return items[Below(items.size())];
  }
  /// Puts `items` in a random order.
  template <typename T>
  void Shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[Below(i)]);
  }

  /// For a structure-aware input with at most one fault, so that a fault accepted shows:
  /// picks which of the next `calls` calls of Fault() says yes (if that many come).
  void AimFault(uint64_t calls) { fault_in_ = Below(calls); }
  /// Whether to put the fault in here (once after each AimFault, if at all).
  bool Fault() { return fault_in_-- == 0; }

  /// Sets `size` bytes at `data` to random values.
  void Fill(void* data, size_t size);
  /// Sets 1 to 3 of the `size` bytes at `data` to random values or to 0, 1 or 2 (small
  /// numbers, flags and terminators are the interesting ones).
  void FlipBytes(void* data, size_t size);
  /// Makes 1 to 3 edits to `text`: a byte removed, doubled or replaced, a run of it cut
  /// out or repeated, or one of `tokens` (or a byte of them) put in.
  void EditText(std::string& text, const std::vector<std::string>& tokens);

  /// Tokens for EditText of YAML: its punctuation, indicators and indentation, and
  /// `words` (a parser's keys and values).
  static std::vector<std::string> YamlTokens(const std::vector<std::string>& words);

 private:
  std::mt19937_64 random_;
  uint64_t fault_in_ = UINT64_MAX;  ///< Fault() calls until the one that says yes
};

}  // namespace cclo::testing
