// The YAML form of a policy, as the config's `policy` key and `ccloctl policy set` take it:
//
//   rules:
//     - name: small-allreduce          # optional, unique
//       collective: allreduce          # required
//       bytes: {min: 0, max: 64K}      # one rank's contribution, inclusive; K, M, G = 1024^n
//       world_size: {min: 2, max: 8}   # inclusive
//       transport: tcp                 # local | tcp
//       datatype: float32
//       tenant: ml
//       comm_label: training
//       algorithm: recursive_doubling  # what it chooses: at least one of these three
//       protocol: eager                # eager | rendezvous
//       segment_bytes: 256K
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "cclo/v1/types.pb.h"
#include "yaml-cpp/yaml.h"

namespace cclo::daemon {

/// Reads a policy mapping and checks it with ValidatePolicy (version left 0).
/// INVALID_ARGUMENT naming the rule and the key otherwise.
absl::StatusOr<cclo::v1::Policy> ParsePolicy(const YAML::Node& node);

/// ParsePolicy of YAML text.
absl::StatusOr<cclo::v1::Policy> ParsePolicyText(const std::string& text);

/// The YAML of a policy (without its version), as ParsePolicy reads it back.
std::string PolicyYaml(const cclo::v1::Policy& policy);

}  // namespace cclo::daemon
