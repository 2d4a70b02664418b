#include "client/ccloctl/format.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/table.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace cclo::ccloctl {
namespace {

using google::protobuf::FieldDescriptor;

// A singular scalar field as people read it: numbers in decimal, strings bare, "-" if empty.
std::string FieldText(const google::protobuf::Message& message, const FieldDescriptor& field) {
  const google::protobuf::Reflection& reflection = *message.GetReflection();
  std::string text;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      text = reflection.GetString(message, &field);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      text = absl::StrCat(reflection.GetUInt32(message, &field));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      text = absl::StrCat(reflection.GetUInt64(message, &field));
      break;
    default:
      google::protobuf::TextFormat::PrintFieldValueToString(message, &field, -1, &text);
  }
  return text.empty() ? "-" : text;
}

}  // namespace

std::string StatusTable(const v1::StatusResponse& status) {
  const google::protobuf::Descriptor& descriptor = *status.GetDescriptor();
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    rows.push_back({field.name(), FieldText(status, field)});
  }
  return client::RenderTable({"key", "value"}, rows);
}

std::string CommunicatorsTable(const v1::ListCommunicatorsResponse& communicators) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::CommunicatorInfo& info : communicators.communicators()) {
    rows.push_back({info.comm_id(), absl::StrCat(info.size()),
                    info.local_ranks().empty() ? "-" : absl::StrJoin(info.local_ranks(), ","),
                    info.state(), absl::StrCat(info.ops_completed()),
                    info.error().empty() ? "-" : info.error()});
  }
  return client::RenderTable({"id", "size", "local_ranks", "state", "ops", "error"}, rows);
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  google::protobuf::util::Status status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("JSON encoding of ", message.GetTypeName(), ": ", status.ToString()));
  }
  return json + "\n";
}

}  // namespace cclo::ccloctl
