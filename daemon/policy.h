// Algorithm-selection policy (DESIGN 8): rules that match an op and its communicator
// (collective, bytes, world size, transport, datatype, tenant, communicator label) and
// choose its algorithm, protocol and segment size. The first matching rule wins; the
// built-in selection (firmware/selection.cc) chooses whatever no rule does. Policies are
// cclo.v1.Policy messages: the same form in the config, in ccloctl and on the wire.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cclo/v1/types.pb.h"
#include "hw/types.h"

namespace cclo::daemon {

/// Transports a rule may match: every rank on one daemon, or across daemons over TCP.
inline constexpr char kLocalTransport[] = "local";
inline constexpr char kTcpTransport[] = "tcp";

/// What the rules see of an op and its communicator.
struct PolicyQuery {
  hw::Collective collective = hw::Collective::kNop;
  hw::DataType datatype = hw::DataType::kFloat32;
  uint64_t bytes = 0;  ///< one rank's contribution: count x datatype size
  uint32_t world_size = 1;
  std::string_view transport;  ///< the strings are the caller's, for the call
  std::string_view tenant;
  std::string_view comm_label;
};

/// What runs, and which rule chose it.
struct PolicyChoice {
  std::string algorithm;
  hw::Protocol protocol = hw::Protocol::kEager;
  uint64_t segment_bytes = 0;  ///< 0: the data session's
  uint32_t rule_index = 0;     ///< 1-based; 0 when no rule matched
  std::string rule;            ///< the rule's name, or "built-in"
};

/// Checks every rule: a known collective, an algorithm that serves it (else the valid
/// ones are listed), a known protocol and transport, non-empty ranges, segment_bytes in
/// the engine's range, well-formed names and labels, unique rule names, no rule that an
/// earlier one hides wholly, and no ranges that overlap an earlier rule of the same
/// matchers without containing it. A rule that an earlier one with other matchers hides
/// in part is allowed (the first match wins, and every rank chooses alike).
/// INVALID_ARGUMENT naming the rule and the field otherwise.
absl::Status ValidatePolicy(const cclo::v1::Policy& policy);

/// The choice for `query` under a policy that passed ValidatePolicy.
PolicyChoice Choose(const cclo::v1::Policy& policy, const PolicyQuery& query);

/// The choice for an op on a communicator of `world_size` ranks that chooses by `comm`'s
/// snapshot: its policy, transport, tenant and label. Every rank passes the same fields,
/// so every rank gets the same choice.
PolicyChoice ChooseFor(const cclo::v1::CommPolicy& comm, hw::Collective collective,
                       hw::DataType datatype, uint64_t bytes, uint32_t world_size);

/// INVALID_ARGUMENT when a rule names a tenant not in `tenants` (a typo would never match).
absl::Status CheckPolicyTenants(const cclo::v1::Policy& policy,
                                const std::vector<std::string>& tenants);

using PolicyPtr = std::shared_ptr<const cclo::v1::Policy>;

/// The daemon's current policy and its version, replaced as a whole.
class PolicyStore {
 public:
  /// Starts at version 1 with `rules` (validated).
  explicit PolicyStore(cclo::v1::Policy rules);

  PolicyPtr Current() const;

  /// Makes `rules` (validated) current with the next version, unless they equal the
  /// current rules; returns the version in force.
  uint64_t Replace(cclo::v1::Policy rules);

 private:
  mutable absl::Mutex mu_;
  PolicyPtr current_ ABSL_GUARDED_BY(mu_);
};

/// True for a communicator label: 1 to 64 of a-z, A-Z, 0-9, '_', '.' and '-'.
bool ValidLabel(const std::string& label);

}  // namespace cclo::daemon
