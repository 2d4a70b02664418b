#include "tests/daemon/json_line.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace cclo::testing {

absl::StatusOr<google::protobuf::Struct> ParseJsonLine(const std::string& line) {
  if (std::any_of(line.begin(), line.end(), [](char c) { return c >= 0 && c < 0x20; })) {
    return absl::InvalidArgumentError(absl::StrCat("raw control character in '", line, "'"));
  }
  google::protobuf::Struct object;
  if (auto parsed = google::protobuf::util::JsonStringToMessage(line, &object); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(parsed.ToString(), " in '", line, "'"));
  }
  for (const char* field : {"time", "level", "message"}) {
    auto found = object.fields().find(field);
    if (found == object.fields().end() ||
        found->second.kind_case() != google::protobuf::Value::kStringValue) {
      return absl::InvalidArgumentError(
          absl::StrCat("no string field ", field, " in '", line, "'"));
    }
  }
  return object;
}

}  // namespace cclo::testing
