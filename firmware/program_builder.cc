#include "firmware/program_builder.h"

#include <algorithm>
#include <string>
#include <utility>

namespace cclo::firmware {

ProgramBuilder::ProgramBuilder(std::string_view algorithm) {
  program_.algorithm = std::string(algorithm);
}

uint32_t ProgramBuilder::Add(hw::Move move) {
  const auto index = static_cast<uint32_t>(program_.moves.size());
  std::vector<Access> mine;
  auto note = [&](const hw::Endpoint& endpoint, bool write) {
    if (endpoint.kind == hw::Endpoint::Kind::kMemory && move.count > 0) {
      mine.push_back({index, endpoint.slot, endpoint.offset, endpoint.offset + move.count, write});
    }
  };
  note(move.op0, false);
  note(move.op1, false);
  note(move.result, true);

  for (const Access& earlier : accesses_) {
    for (const Access& access : mine) {
      const bool overlap =
          earlier.slot == access.slot && earlier.begin < access.end && access.begin < earlier.end;
      if (overlap && (earlier.write || access.write)) move.deps.push_back(earlier.move);
    }
  }
  std::sort(move.deps.begin(), move.deps.end());
  move.deps.erase(std::unique(move.deps.begin(), move.deps.end()), move.deps.end());

  accesses_.insert(accesses_.end(), mine.begin(), mine.end());
  program_.moves.push_back(std::move(move));
  return index;
}

uint32_t ProgramBuilder::Copy(const hw::Endpoint& from, const hw::Endpoint& to, uint64_t count,
                              std::vector<uint32_t> after) {
  hw::Move move;
  move.deps = std::move(after);
  move.op0 = from;
  move.result = to;
  move.function = hw::Function::kCopy;
  move.count = count;
  return Add(std::move(move));
}

uint32_t ProgramBuilder::Reduce(const hw::Endpoint& op0, const hw::Endpoint& op1,
                                const hw::Endpoint& to, uint64_t count,
                                std::vector<uint32_t> after) {
  hw::Move move;
  move.deps = std::move(after);
  move.op0 = op0;
  move.op1 = op1;
  move.result = to;
  move.function = hw::Function::kReduce;
  move.count = count;
  return Add(std::move(move));
}

hw::Program ProgramBuilder::Finish() && { return std::move(program_); }

}  // namespace cclo::firmware
