#include "client/ccloctl/format.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/table.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace cclo::ccloctl {
namespace {

using google::protobuf::FieldDescriptor;

// A text, or "-" when empty.
std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

// A number, or "-" for zero (ids and pids that are not set).
std::string OrDash(uint64_t value) { return value == 0 ? "-" : absl::StrCat(value); }

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
  return OrDash(text);
}

}  // namespace

std::string KeyValueTable(const google::protobuf::Message& message) {
  const google::protobuf::Descriptor& descriptor = *message.GetDescriptor();
  const google::protobuf::Reflection& reflection = *message.GetReflection();
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    if (!field.is_repeated()) {
      rows.push_back({field.name(), FieldText(message, field)});
      continue;
    }
    std::vector<std::string> values(reflection.FieldSize(message, &field));
    for (size_t index = 0; index < values.size(); ++index) {
      google::protobuf::TextFormat::PrintFieldValueToString(
          message, &field, static_cast<int>(index), &values[index]);
    }
    rows.push_back({field.name(), OrDash(absl::StrJoin(values, ","))});
  }
  return client::RenderTable({"key", "value"}, rows);
}

std::string StatusTable(const v1::StatusResponse& status) { return KeyValueTable(status); }

std::string CommunicatorsTable(const v1::ListCommunicatorsResponse& communicators) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::CommunicatorInfo& info : communicators.communicators()) {
    rows.push_back({info.comm_id(), OrDash(info.tenant()), absl::StrCat(info.size()),
                    OrDash(absl::StrJoin(info.local_ranks(), ",")), info.state(),
                    absl::StrCat(info.ops_completed()), OrDash(info.error())});
  }
  return client::RenderTable({"id", "tenant", "size", "local_ranks", "state", "ops", "error"},
                             rows);
}

std::string CommunicatorTable(const v1::ShowCommunicatorResponse& communicator) {
  const absl::Time created =
      absl::FromUnixMillis(static_cast<int64_t>(communicator.created_unix_ms()));
  std::string out = client::RenderTable(
      {"key", "value"},
      {{"id", communicator.comm_id()},
       {"tenant", OrDash(communicator.tenant())},
       {"size", absl::StrCat(communicator.size())},
       {"state", communicator.state()},
       {"error", OrDash(communicator.error())},
       {"created", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", created, absl::UTCTimeZone())},
       {"ops_completed", absl::StrCat(communicator.ops_completed())},
       {"ops_failed", absl::StrCat(communicator.ops_failed())},
       {"ops_in_flight", absl::StrCat(communicator.ops_in_flight())},
       {"bytes_sent", absl::StrCat(communicator.bytes_sent())},
       {"label", OrDash(communicator.policy().comm_label())},
       {"transport", OrDash(communicator.policy().transport())},
       {"policy", communicator.has_policy()
                      ? absl::StrCat("version ", communicator.policy().policy().version(),
                                     " of root ", communicator.policy().root_address(), ", ",
                                     communicator.policy().policy().rules_size(), " rules")
                      : "-"}});
  std::vector<std::vector<std::string>> members;
  for (const v1::MemberInfo& member : communicator.members()) {
    members.push_back({absl::StrCat(member.rank()), member.daemon_address(), member.data_address(),
                       member.local() ? "yes" : "no", OrDash(member.session_id()),
                       OrDash(member.client_pid())});
  }
  absl::StrAppend(
      &out, "\n",
      client::RenderTable(
          {"rank", "daemon_address", "data_address", "local", "session", "client_pid"}, members));
  if (communicator.departed().empty()) return out;
  std::vector<std::vector<std::string>> departed;
  for (const v1::DepartedRank& rank : communicator.departed()) {
    departed.push_back({absl::StrCat(rank.rank()), rank.reason()});
  }
  absl::StrAppend(&out, "\n", client::RenderTable({"departed_rank", "reason"}, departed));
  return out;
}

std::string TenantsTable(const v1::ListTenantsResponse& tenants) {
  std::vector<std::string> header = {"tenant", "weight"};
  std::vector<std::vector<std::string>> rows;
  for (const v1::TenantInfo& tenant : tenants.tenants()) {
    if (rows.empty()) {
      for (const v1::QuotaUse& quota : tenant.quotas()) header.push_back(quota.name());
    }
    std::vector<std::string>& row = rows.emplace_back();
    row = {tenant.name(), absl::StrCat(tenant.weight())};
    for (const v1::QuotaUse& quota : tenant.quotas()) {
      row.push_back(absl::StrCat(quota.used(), "/", quota.limit()));
    }
    row.push_back(absl::StrCat(tenant.ops_queued()));
    row.push_back(absl::StrCat(tenant.ops_running()));
    row.push_back(absl::StrCat(tenant.refusals()));
  }
  for (const char* column : {"queued", "running", "refusals"}) header.push_back(column);
  return client::RenderTable(header, rows);
}

std::string SessionsTable(const v1::ListSessionsResponse& sessions) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::SessionInfo& session : sessions.sessions()) {
    const absl::Time attached =
        absl::FromUnixMillis(static_cast<int64_t>(session.attached_unix_ms()));
    rows.push_back({absl::StrCat(session.session_id()), session.tenant(),
                    absl::StrCat(session.pid()), absl::StrCat(session.uid()),
                    absl::StrCat(session.gid()), absl::StrCat(session.buffers()),
                    absl::StrCat(session.buffer_bytes()), absl::StrCat(session.communicators()),
                    absl::StrCat(session.ops_queued()), absl::StrCat(session.ops_running()),
                    absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", attached, absl::UTCTimeZone())});
  }
  return client::RenderTable({"session", "tenant", "pid", "uid", "gid", "buffers", "buffer_bytes",
                              "comms", "queued", "running", "attached"},
                             rows);
}

std::string BuffersTable(const v1::ListBuffersResponse& buffers) {
  std::vector<std::vector<std::string>> rows;
  for (const v1::BufferInfo& buffer : buffers.buffers()) {
    rows.push_back({absl::StrCat(buffer.buffer_id()), absl::StrCat(buffer.session_id()),
                    buffer.tenant(), absl::StrCat(buffer.bytes()),
                    buffer.freed() ? "freed, held by an op" : "allocated"});
  }
  return client::RenderTable({"buffer", "session", "tenant", "bytes", "state"}, rows);
}

std::string StatsTable(const v1::StatsResponse& stats) {
  // Interpolated within a histogram bucket: three digits say all the estimate knows (6.67ms,
  // not 6.66666675ms).
  auto latency = [](const v1::OpStats& row, double seconds) -> std::string {
    if (row.ops_ok() == 0) return "-";
    return absl::FormatDuration(absl::Seconds(std::stod(absl::StrFormat("%.3g", seconds))));
  };
  std::vector<std::vector<std::string>> rows;
  for (const v1::OpStats& row : stats.ops()) {
    rows.push_back({row.tenant(), row.collective(), row.algorithm(), row.protocol(),
                    absl::StrCat(row.ops_ok()), absl::StrCat(row.ops_failed()),
                    absl::StrCat(row.bytes()), latency(row, row.latency_p50_seconds()),
                    latency(row, row.latency_p99_seconds())});
  }
  std::string out = client::RenderTable(
      {"tenant", "collective", "algorithm", "protocol", "ok", "failed", "bytes", "p50", "p99"},
      rows);
  auto append = [&](const char* what, const auto& counts) {
    if (counts.empty()) return;
    std::vector<std::vector<std::string>> rows;
    for (const v1::ErrorCount& count : counts) {
      rows.push_back({count.reason(), absl::StrCat(count.ops())});
    }
    absl::StrAppend(&out, "\n", client::RenderTable({what, "ops"}, rows));
  };
  append("error", stats.errors());
  append("refused", stats.refused());
  return out;
}

std::string LogLevelTable(const v1::SetLogLevelResponse& response) {
  return client::RenderTable({"key", "value"}, {{"previous_level", response.previous()}});
}

std::string DestroyTable(const v1::AdminDestroyCommunicatorResponse& response) {
  return KeyValueTable(response);
}

std::string DrainTable(const v1::DrainResponse& response) { return KeyValueTable(response); }

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
