// How ccloctl prints Admin responses: tables for people, JSON for scripts.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "cclo/v1/admin.pb.h"
#include "google/protobuf/message.h"

namespace cclo::ccloctl {

/// Every field of `message` as a `key value` line, in proto field order; the values of a
/// repeated field joined by ",".
std::string KeyValueTable(const google::protobuf::Message& message);

/// KeyValueTable of the daemon's status.
std::string StatusTable(const v1::StatusResponse& status);

/// One line per communicator: id, size, local ranks, state, ops, error.
std::string CommunicatorsTable(const v1::ListCommunicatorsResponse& communicators);

/// One communicator: `key value` lines (id, size, state, error, created, op counters,
/// label, transport, the policy it chooses by), a blank line and one line per member
/// (rank, addresses, local, session, client pid), then, if local ranks left, a blank line
/// and one line per departed rank with the reason.
std::string CommunicatorTable(const v1::ShowCommunicatorResponse& communicator);

/// One line per tenant: name, weight, each quota as used/limit, ops queued and running,
/// quota refusals.
std::string TenantsTable(const v1::ListTenantsResponse& tenants);

/// One line per session: id, tenant, pid, uid, gid, buffers, buffer bytes, communicators,
/// ops queued and running, attach time (UTC).
std::string SessionsTable(const v1::ListSessionsResponse& sessions);

/// One line per buffer: id, session, tenant, bytes.
std::string BuffersTable(const v1::ListBuffersResponse& buffers);

/// One line per (tenant, collective, algorithm, protocol): ops OK and failed, payload bytes,
/// latency p50 and p99 ("-" without ops that finished OK); then, if ops failed, a blank
/// line and one line per error reason with its count.
std::string StatsTable(const v1::StatsResponse& stats);

/// The level SetLogLevel replaced, as a `key value` line.
std::string LogLevelTable(const v1::SetLogLevelResponse& response);

/// What DestroyCommunicator took down, as `key value` lines (local ranks joined by ",").
std::string DestroyTable(const v1::AdminDestroyCommunicatorResponse& response);

/// How a drain ended, as `key value` lines in proto field order.
std::string DrainTable(const v1::DrainResponse& response);

/// `message` as one line of JSON with the proto field names, fields at their default value
/// included (proto3 JSON mapping: 64-bit integers are strings), ending in a newline.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

/// Prints `response` as JSON or through `table` (Response -> std::string) to `out`, or the
/// error to `err`; returns the exit code (0, or 1 on an error).
template <typename Response, typename Table>
int Print(const absl::StatusOr<Response>& response, bool json, const Table& table,
          std::ostream& out, std::ostream& err) {
  if (!response.ok()) {
    err << "ccloctl: " << response.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> text = json ? ToJson(*response) : table(*response);
  if (!text.ok()) {
    err << "ccloctl: " << text.status().message() << "\n";
    return 1;
  }
  out << *text;
  return 0;
}

}  // namespace cclo::ccloctl
