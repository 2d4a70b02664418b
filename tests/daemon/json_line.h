// Reads a log line of log_format json, for the tests of that format.
#pragma once

#include <google/protobuf/struct.pb.h>

#include <string>

#include "absl/status/statusor.h"

namespace cclo::testing {

/// `line` (without its newline) as one JSON object with string fields time, level and
/// message; INVALID_ARGUMENT saying why not. Raw control characters are refused too: JSON
/// does not allow them in a string, and protobuf's parser lets them through.
absl::StatusOr<google::protobuf::Struct> ParseJsonLine(const std::string& line);

}  // namespace cclo::testing
