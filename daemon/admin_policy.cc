// The Admin service's policy calls: get, set, validate and explain.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/policy.h"
#include "daemon/policy_yaml.h"
#include "daemon/services.h"
#include "daemon/status.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {

std::vector<std::string> AdminService::TenantNames() const {
  std::vector<std::string> tenants;
  for (const TenantPtr& tenant : tenants_->All()) tenants.push_back(tenant->name());
  return tenants;
}

absl::StatusOr<cclo::v1::Policy> AdminService::ParseForThisDaemon(const std::string& yaml) const {
  absl::StatusOr<cclo::v1::Policy> policy = ParsePolicyText(yaml);
  if (!policy.ok()) return policy.status();
  if (absl::Status known = CheckPolicyTenants(*policy, TenantNames()); !known.ok()) return known;
  return policy;
}

grpc::Status AdminService::GetPolicy(grpc::ServerContext*, const cclo::v1::GetPolicyRequest*,
                                     cclo::v1::GetPolicyResponse* response) {
  PolicyPtr policy = policies_->Current();
  *response->mutable_policy() = *policy;
  response->set_yaml(PolicyYaml(*policy));
  return grpc::Status::OK;
}

grpc::Status AdminService::SetPolicy(grpc::ServerContext* context,
                                     const cclo::v1::SetPolicyRequest* request,
                                     cclo::v1::GetPolicyResponse* response) {
  absl::StatusOr<cclo::v1::Policy> policy = ParseForThisDaemon(request->yaml());
  if (!policy.ok()) {
    spdlog::warn("policy set through the admin socket rejected, the old one stays: {}",
                 std::string(policy.status().message()));
    return ToGrpc(policy.status());
  }
  const int rules = policy->rules_size();
  const uint64_t version = policies_->Replace(*std::move(policy));
  spdlog::warn("policy version {} ({} rules) set through the admin socket", version, rules);
  return GetPolicy(context, nullptr, response);
}

grpc::Status AdminService::ValidatePolicy(grpc::ServerContext*,
                                          const cclo::v1::SetPolicyRequest* request,
                                          cclo::v1::ValidatePolicyResponse* response) {
  absl::StatusOr<cclo::v1::Policy> policy = ParseForThisDaemon(request->yaml());
  if (!policy.ok()) return ToGrpc(policy.status());
  response->set_rules(static_cast<uint32_t>(policy->rules_size()));
  return grpc::Status::OK;
}

grpc::Status AdminService::ExplainPolicy(grpc::ServerContext*,
                                         const cclo::v1::ExplainPolicyRequest* request,
                                         cclo::v1::ExplainPolicyResponse* response) {
  const int collective = request->collective();
  if (collective <= static_cast<int>(hw::Collective::kNop) ||
      collective > static_cast<int>(hw::kLastCollective)) {
    return ToGrpc(absl::InvalidArgumentError(absl::StrCat("unknown collective ", collective)));
  }
  if (request->datatype() < 0 || request->datatype() > static_cast<int>(hw::DataType::kFloat64)) {
    return ToGrpc(absl::InvalidArgumentError(absl::StrCat("unknown datatype ", request->datatype())));
  }
  cclo::v1::CommPolicy snapshot;
  uint32_t world_size = 0;
  std::string source;
  if (!request->comm_id().empty()) {
    if (request->world_size() != 0 || !request->transport().empty() ||
        !request->tenant().empty() || !request->comm_label().empty()) {
      return ToGrpc(absl::InvalidArgumentError(
          "with a communicator, its own world size, transport, tenant and label apply"));
    }
    absl::StatusOr<cclo::v1::ShowCommunicatorResponse> comm =
        communicators_->Show(request->comm_id());
    if (!comm.ok()) return ToGrpc(comm.status());
    if (!comm->has_policy()) {
      return ToGrpc(absl::FailedPreconditionError(
          absl::StrCat("communicator ", comm->comm_id(), " has not finished joining")));
    }
    snapshot = comm->policy();
    world_size = comm->size();
    source = absl::StrCat("communicator ", comm->comm_id(), " (policy of root daemon ",
                          snapshot.root_address(), ")");
  } else {
    const std::string& transport = request->transport();
    if (!transport.empty() && transport != kLocalTransport && transport != kTcpTransport) {
      return ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("transport '", transport, "' is not one of local, tcp")));
    }
    *snapshot.mutable_policy() = *policies_->Current();
    const std::vector<std::string> tenants = TenantNames();
    if (!request->tenant().empty() &&
        std::find(tenants.begin(), tenants.end(), request->tenant()) == tenants.end()) {
      return ToGrpc(absl::InvalidArgumentError(
          absl::StrCat("tenant '", request->tenant(),
                       "' is not configured (tenants: ", absl::StrJoin(tenants, ", "), ")")));
    }
    snapshot.set_transport(transport.empty() ? kTcpTransport : transport);
    snapshot.set_tenant(request->tenant());
    snapshot.set_comm_label(request->comm_label());
    world_size = request->world_size() == 0 ? 2 : request->world_size();
    source = "this daemon";
  }
  const PolicyChoice choice =
      ChooseFor(snapshot, static_cast<hw::Collective>(collective),
                static_cast<hw::DataType>(request->datatype()), request->bytes(), world_size);
  response->set_rule_index(choice.rule_index);
  response->set_rule(choice.rule);
  response->set_algorithm(choice.algorithm);
  response->set_protocol(std::string(hw::ProtocolName(choice.protocol)));
  response->set_segment_bytes(choice.segment_bytes);
  response->set_policy_version(snapshot.policy().version());
  response->set_source(source);
  response->set_world_size(world_size);
  response->set_transport(snapshot.transport());
  response->set_tenant(snapshot.tenant());
  response->set_comm_label(snapshot.comm_label());
  return grpc::Status::OK;
}

}  // namespace cclo::daemon
