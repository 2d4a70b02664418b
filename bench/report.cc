#include "bench/report.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/table.h"

namespace cclo::bench {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
// /proc/<pid>/stat counts CPU time in ticks of 10 ms: below ten of them, no figure.
constexpr double kLeastCpuSeconds = 0.1;

std::string Fixed(double value, int digits) { return absl::StrFormat("%.*f", digits, value); }

// The ranks whose buffer of the op's size counts as moved per iteration: send's senders (each
// message once, as sendrecv counts each rank's send; the last of an odd number sits out),
// every rank otherwise.
uint32_t MovingRanks(Op op, uint32_t ranks) { return op == Op::kSend ? ranks / 2 : ranks; }

}  // namespace

void Pool(Measurements& into, Measurements round) {
  auto append = [](Timings& to, Timings& from) {
    for (auto& [key, micros] : from) {
      std::vector<double>& pooled = to[key];
      pooled.insert(pooled.end(), micros.begin(), micros.end());
    }
  };
  append(into.cclo.timings, round.cclo.timings);
  for (const auto& [key, seconds] : round.cclo.cpu_seconds) into.cclo.cpu_seconds[key] += seconds;
  for (auto& [key, check] : round.cclo.checks) KeepCheck(into.cclo.checks[key], std::move(check));
  for (auto& [stack, timings] : round.stacks) {
    append(into.stacks[stack], timings);
    ++into.stack_rounds[stack];
  }
  if (round.link_runs > 0) {
    const double before = into.link_runs, after = into.link_runs + round.link_runs;
    into.link.one_way = (into.link.one_way * before + round.link.one_way * round.link_runs) / after;
    into.link.duplex = (into.link.duplex * before + round.link.duplex * round.link_runs) / after;
    into.link_runs += round.link_runs;
  }
}

std::string RenderReport(const BenchOptions& options, const Measurements& measurements) {
  std::vector<std::string> header = {"op",         "size",       "p50_us",   "p99_us",
                                     "algbw_GB/s", "busbw_GB/s", "cpu_s/GiB"};
  if (options.check) header.push_back("check");
  for (const auto& [stack, timings] : measurements.stacks) {
    header.push_back(BaselineName(stack) + "_p50_us");
    header.push_back("x" + BaselineName(stack));
  }
  const LinkRates& rates = measurements.link;
  const bool link = rates.one_way > 0 && rates.duplex > 0;
  if (link) header.insert(header.end(), {"busbw/link", "busbw/duplex"});
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, micros] : measurements.cclo.timings) {
    const auto& [op, size] = key;
    const double p50 = Percentile(micros, 0.5);
    const double algbw = p50 > 0 ? size / p50 / 1e3 : 0;
    const double busbw = algbw * BusFactor(op, options.ranks());
    const bool moves = !IsNop(op);
    std::vector<std::string> row = {OpName(op), absl::StrCat(size), Fixed(p50, 1),
                                    Fixed(Percentile(micros, 0.99), 1)};
    row.push_back(moves ? Fixed(algbw, 3) : "-");
    row.push_back(moves ? Fixed(busbw, 3) : "-");
    auto cpu = measurements.cclo.cpu_seconds.find(key);
    const double moved = static_cast<double>(size) * MovingRanks(op, options.ranks()) *
                         options.iters * options.rounds / kGiB;
    const bool measurable =
        moves && cpu != measurements.cclo.cpu_seconds.end() && cpu->second >= kLeastCpuSeconds;
    row.push_back(measurable ? Fixed(cpu->second / moved, 2) : "-");
    if (options.check) {
      auto check = measurements.cclo.checks.find(key);
      row.push_back(!moves                                    ? "-"
                    : check == measurements.cclo.checks.end() ? "missing"
                                                              : check->second);
    }
    for (const auto& [stack, timings] : measurements.stacks) {
      auto theirs = timings.find(key);
      if (theirs == timings.end()) {
        row.insert(row.end(), {"-", "-"});
        continue;
      }
      const double their_p50 = Percentile(theirs->second, 0.5);
      row.push_back(Fixed(their_p50, 1));
      row.push_back(p50 > 0 ? Fixed(their_p50 / p50, 2) : "-");
    }
    if (link) {
      row.push_back(moves ? Fixed(busbw * 1e9 / rates.one_way, 2) : "-");
      row.push_back(moves ? Fixed(busbw * 1e9 / rates.duplex, 2) : "-");
    }
    rows.push_back(std::move(row));
  }
  return client::RenderTable(header, rows);
}

std::string RenderGeomeans(const Measurements& measurements) {
  if (measurements.stacks.empty()) return "";
  std::vector<std::string> header = {"op", "sizes", "from", "to"};
  for (const auto& [stack, timings] : measurements.stacks) {
    header.push_back("x" + BaselineName(stack));
  }
  // Our p50 per size from kGeomeanFromBytes, per op (the map keeps sizes in order).
  std::map<Op, std::map<uint64_t, double>> ours;
  for (const auto& [key, micros] : measurements.cclo.timings) {
    if (key.second >= kGeomeanFromBytes) ours[key.first][key.second] = Percentile(micros, 0.5);
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [op, p50s] : ours) {
    std::vector<std::string> row = {OpName(op), absl::StrCat(p50s.size()),
                                    absl::StrCat(p50s.begin()->first),
                                    absl::StrCat(p50s.rbegin()->first)};
    bool any = false;
    for (const auto& [stack, timings] : measurements.stacks) {
      double log_sum = 0;
      bool whole = true;
      for (const auto& [size, p50] : p50s) {
        auto theirs = timings.find({op, size});
        const double their_p50 = theirs == timings.end() ? 0 : Percentile(theirs->second, 0.5);
        if (their_p50 <= 0 || p50 <= 0) {
          whole = false;
          break;
        }
        log_sum += std::log(their_p50 / p50);
      }
      row.push_back(whole ? Fixed(std::exp(log_sum / p50s.size()), 2) : "-");
      any |= whole;
    }
    if (any) rows.push_back(std::move(row));
  }
  if (rows.empty()) return "";
  return client::RenderTable(header, rows);
}

}  // namespace cclo::bench
