// Builds a Program move by move and derives the dependencies that memory hazards need, so
// that algorithms only say which moves to make, in which order.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "hw/program.h"

namespace cclo::firmware {

/// Appends moves to a Program. Every appended move gets a dependency on each earlier move
/// that touches overlapping elements of the same buffer slot where either of the two
/// writes, because moves start in order but may complete out of order (hw/program.h).
/// Network order needs no dependencies: matching follows program order.
class ProgramBuilder {
 public:
  /// `algorithm` is the registry name recorded in the Program.
  explicit ProgramBuilder(std::string_view algorithm);

  /// Appends `move` with its hazard dependencies added to move.deps; returns its index.
  uint32_t Add(hw::Move move);

  /// result = op0 for `count` elements, after the moves in `after` besides its hazards.
  uint32_t Copy(const hw::Endpoint& from, const hw::Endpoint& to, uint64_t count,
                std::vector<uint32_t> after = {});

  /// result = op0 (+) op1 for `count` elements, with the call's reduce op, after the moves
  /// in `after` besides its hazards.
  uint32_t Reduce(const hw::Endpoint& op0, const hw::Endpoint& op1, const hw::Endpoint& to,
                  uint64_t count, std::vector<uint32_t> after = {});

  /// Gives the program `elements` elements of scratch memory (hw::Slot::kScratch).
  void SetScratch(uint64_t elements) { program_.scratch_elements = elements; }

  /// The program built so far.
  hw::Program Finish() &&;

 private:
  struct Access {
    uint32_t move;
    hw::Slot slot;
    uint64_t begin;
    uint64_t end;  ///< one past the last element
    bool write;
  };

  hw::Program program_;
  std::vector<Access> accesses_;  ///< every memory access of the moves in program_
};

}  // namespace cclo::firmware
