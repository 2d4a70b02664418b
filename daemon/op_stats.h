// What the daemon's finished ops add up to, for the metrics and `ccloctl stats`: ops and
// payload bytes by (tenant, collective, algorithm, protocol), latency by collective and
// payload size, queue wait by tenant, errors and refused Submits by status code. Every key is
// bounded: tenant names come from the config, collectives and protocols are enums, algorithms come
// from the registry, sizes are bucketed and reasons are status codes.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hw/types.h"

namespace cclo::daemon {

/// Bucketed durations. Bucket i counts samples of at most kBounds[i] seconds and more than
/// the bound before it; the last bucket counts the samples above every bound.
struct Histogram {
  /// Upper bounds in seconds: 10 µs doubling up to about 42 s.
  static const std::vector<double>& Bounds();

  void Observe(absl::Duration sample);
  /// The q-quantile (0 < q < 1) in seconds, interpolated linearly within the bucket it
  /// falls in as Prometheus' histogram_quantile does; 0 without samples.
  double Quantile(double q) const;

  std::vector<uint64_t> counts = std::vector<uint64_t>(Bounds().size() + 1);
  uint64_t count = 0;
  double sum_seconds = 0;
};

/// Payload size classes of the latency histograms: "4KiB" (at most 4 KiB), "64KiB",
/// "1MiB", "16MiB" (each above the one before), "inf" (above 16 MiB).
std::string_view SizeBucket(uint64_t bytes);

/// An op as the statistics see it; the algorithm is known only once it ran.
struct OpLabels {
  std::string tenant;
  hw::Collective collective = hw::Collective::kNop;
  hw::Protocol protocol = hw::Protocol::kEager;
  /// Payload: one rank's contribution, count times datatype size (what the registry's
  /// default selection goes by).
  uint64_t bytes = 0;
};

/// One row of the per-op statistics.
struct OpKey {
  std::string tenant;
  hw::Collective collective = hw::Collective::kNop;
  /// The algorithm that ran, "none" for an op that ended before one was chosen.
  std::string algorithm;
  hw::Protocol protocol = hw::Protocol::kEager;
  auto operator<=>(const OpKey&) const = default;
};

struct OpRow {
  uint64_t ok = 0;
  uint64_t failed = 0;
  uint64_t bytes = 0;  ///< payload bytes of the ops that finished OK
  Histogram latency;   ///< submit to completion of the ops that finished OK
};

/// Everything counted since the start.
struct OpTotals {
  std::map<OpKey, OpRow> ops;
  /// Latency of the ops that finished OK by (collective, SizeBucket of the payload).
  std::map<std::pair<hw::Collective, std::string_view>, Histogram> latency;
  /// Submit to hand-over to the engine (waiting for `after` ops and earlier ops of the
  /// same communicator handle), by tenant; only ops that reached the engine.
  std::map<std::string, Histogram> queue_wait;
  /// Ops that ended with an error, by status code.
  std::map<absl::StatusCode, uint64_t> errors;
  /// Submits refused before an op existed (bad fields, unknown references, a full quota,
  /// a drain), by status code.
  std::map<absl::StatusCode, uint64_t> refused;
};

/// The counters; thread-safe.
class OpStats {
 public:
  /// The op went to the engine `waited` after it was submitted.
  void Started(const OpLabels& op, absl::Duration waited);
  /// The op ended `elapsed` after it was submitted with `status`; `algorithm` is what ran
  /// (empty if none did).
  void Finished(const OpLabels& op, std::string_view algorithm, absl::Duration elapsed,
                const absl::Status& status);
  /// A Submit was refused with `code`.
  void Refused(absl::StatusCode code);
  /// A copy of the counters.
  OpTotals Totals() const;

 private:
  mutable absl::Mutex mu_;
  OpTotals totals_ ABSL_GUARDED_BY(mu_);
};

/// A status code as a label: lower case, e.g. "deadline_exceeded".
std::string StatusCodeLabel(absl::StatusCode code);

}  // namespace cclo::daemon
