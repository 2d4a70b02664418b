// The key of a YAML mapping entry as a name. yaml-cpp throws when a key that is a list or
// a mapping is read as a string; config and policy files come from operators, so such a
// key is an error naming it, not a crash.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace cclo::daemon {

inline absl::StatusOr<std::string> YamlKey(const YAML::Node& key) {
  if (!key.IsScalar()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key '", YAML::Dump(key), "' is not a plain name"));
  }
  return key.Scalar();
}

}  // namespace cclo::daemon
