#include "daemon/op_stats.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace cclo::daemon {

const std::vector<double>& Histogram::Bounds() {
  static const std::vector<double> bounds = [] {
    // 1, 2 and 5 times 10 µs, 100 µs, ... up to 50 s. The exposition writes a bound with 16
    // significant digits, which shows these as they are; a doubling series from 10 µs would
    // have `le="0.0006400000000000001"`, which a query for 0.00064 does not match.
    std::vector<double> values;
    for (uint64_t decade = 10; decade <= 10'000'000; decade *= 10) {
      for (uint64_t step : {1, 2, 5}) values.push_back(static_cast<double>(decade * step) / 1e6);
    }
    return values;
  }();
  return bounds;
}

void Histogram::Observe(absl::Duration sample) {
  const double seconds = absl::ToDoubleSeconds(sample);
  const std::vector<double>& bounds = Bounds();
  counts[std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin()]++;
  count++;
  sum_seconds += seconds;
}

double Histogram::Quantile(double q) const {
  if (count == 0) return 0;
  const std::vector<double>& bounds = Bounds();
  const double rank = q * static_cast<double>(count);
  uint64_t below = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (static_cast<double>(below + counts[i]) >= rank) {
      const double lower = i == 0 ? 0 : bounds[i - 1];
      return lower + (bounds[i] - lower) * (rank - static_cast<double>(below)) /
                         static_cast<double>(counts[i]);
    }
    below += counts[i];
  }
  return bounds.back();  // in the open-ended bucket
}

std::string_view SizeBucket(uint64_t bytes) {
  static constexpr std::pair<uint64_t, std::string_view> kBuckets[] = {
      {4ull << 10, "4KiB"}, {64ull << 10, "64KiB"}, {1ull << 20, "1MiB"}, {16ull << 20, "16MiB"}};
  for (const auto& [limit, name] : kBuckets) {
    if (bytes <= limit) return name;
  }
  return "inf";
}

void OpStats::Started(const OpLabels& op, absl::Duration waited) {
  absl::MutexLock lock(&mu_);
  totals_.queue_wait[op.tenant].Observe(waited);
}

void OpStats::Finished(const OpLabels& op, std::string_view algorithm, absl::Duration elapsed,
                       const absl::Status& status) {
  const OpKey key{op.tenant, op.collective, algorithm.empty() ? "none" : std::string(algorithm),
                  op.protocol};
  absl::MutexLock lock(&mu_);
  OpRow& row = totals_.ops[key];
  if (!status.ok()) {
    row.failed++;
    totals_.errors[status.code()]++;
    return;
  }
  row.ok++;
  row.bytes += op.bytes;
  row.latency.Observe(elapsed);
  totals_.latency[{op.collective, SizeBucket(op.bytes)}].Observe(elapsed);
}

void OpStats::Refused(absl::StatusCode code) {
  absl::MutexLock lock(&mu_);
  totals_.refused[code]++;
}

OpTotals OpStats::Totals() const {
  absl::MutexLock lock(&mu_);
  return totals_;
}

std::string StatusCodeLabel(absl::StatusCode code) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(code));
}

}  // namespace cclo::daemon
