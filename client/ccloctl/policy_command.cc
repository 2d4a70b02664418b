#include "client/ccloctl/policy_command.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "client/ccloctl/format.h"
#include "client/cli.h"
#include "hw/types.h"

namespace cclo::ccloctl {
namespace {

std::string PolicyText(const v1::GetPolicyResponse& response) {
  return absl::StrCat("# policy version ", response.policy().version(), ", ",
                      response.policy().rules_size(), " rules\n", response.yaml());
}

}  // namespace

PolicyCommand::PolicyCommand(CLI::App& app) {
  policy_ = app.add_subcommand(
      "policy", "the algorithm-selection policy: rules choosing algorithm, protocol and segment "
                "size for new communicators");
  policy_->require_subcommand(0, 1);  // none is refused by Run, naming them
  get_ = policy_->add_subcommand("get", "print the daemon's policy (version and YAML rules)");
  set_ = policy_->add_subcommand(
      "set", "replace the daemon's policy with a YAML file until its next restart or reload; "
             "communicators created afterwards use it");
  validate_ = policy_->add_subcommand(
      "validate", "check a YAML policy file as `set` would, changing nothing");
  for (CLI::App* command : {set_, validate_}) {
    command->add_option("file", file_, "YAML file with a `rules` list (docs/operations.md)")
        ->required();
  }
  explain_ = policy_->add_subcommand(
      "explain", "which rule chooses what for an op, on a communicator or on the daemon's policy");
  explain_
      ->add_option("--comm", comm_id_,
                   "communicator id (or unique prefix): use its policy snapshot, size, "
                   "transport, tenant and label")
      ->check(client::Utf8());
  explain_->add_option("--op", op_, "collective, e.g. allreduce")->required();
  explain_->add_option("--bytes", bytes_, "one rank's contribution, e.g. 4096, 64K, 1M")
      ->capture_default_str();
  explain_->add_option("--datatype", datatype_, "element type, e.g. float32")
      ->capture_default_str();
  explain_->add_option("--world-size", world_size_, "without --comm: ranks (default 2)")
      ->check(client::Decimal(std::numeric_limits<uint32_t>::max()))
      ->check(CLI::Range(uint32_t{1}, std::numeric_limits<uint32_t>::max()));
  explain_->add_option("--transport", transport_, "without --comm: local or tcp (default tcp)")
      ->check(client::Utf8());
  explain_->add_option("--tenant", tenant_, "without --comm: the communicator's tenant")
      ->check(client::Utf8());
  explain_->add_option("--label", label_, "without --comm: the communicator's label")
      ->check(client::Utf8());
}

int PolicyCommand::Run(AdminRpc& admin, bool json, std::ostream& out, std::ostream& err) const {
  using Stub = v1::Admin::Stub;
  if (policy_->get_subcommands().empty()) return client::CommandRequired(*policy_, err);
  if (get_->parsed()) {
    return Print(admin.Call(&Stub::GetPolicy, "GetPolicy"), json, PolicyText, out, err);
  }
  if (set_->parsed() || validate_->parsed()) {
    absl::StatusOr<std::string> text = hw::ReadTextFile("policy file", file_);
    if (!text.ok()) {
      err << "ccloctl: " << text.status().message() << "\n";
      return 1;
    }
    if (absl::Status utf8 = hw::CheckUtf8(*text); !utf8.ok()) {
      err << "ccloctl: policy file " << file_ << " " << utf8.message() << "\n";
      return 1;
    }
    v1::SetPolicyRequest request;
    request.set_yaml(*text);
    if (set_->parsed()) {
      return Print(admin.Call(&Stub::SetPolicy, "SetPolicy", request), json,
                   [](const v1::GetPolicyResponse& response) {
                     return absl::StrCat("policy version ", response.policy().version(),
                                         " in force, ", response.policy().rules_size(),
                                         " rules\n");
                   },
                   out, err);
    }
    return Print(admin.Call(&Stub::ValidatePolicy, "ValidatePolicy", request), json,
                 [this](const v1::ValidatePolicyResponse& response) {
                   return absl::StrCat(file_, ": valid, ", response.rules(), " rules\n");
                 },
                 out, err);
  }
  v1::ExplainPolicyRequest request;
  absl::StatusOr<hw::Collective> collective = hw::ParseCollective(op_);
  absl::StatusOr<hw::DataType> datatype = hw::ParseDataType(datatype_);
  absl::StatusOr<uint64_t> bytes = hw::ParseByteSize(bytes_);
  const std::pair<const char*, absl::Status> checks[] = {{"--op ", collective.status()},
                                                         {"--datatype ", datatype.status()},
                                                         {"--bytes ", bytes.status()}};
  for (const auto& [flag, status] : checks) {
    if (!status.ok()) {
      err << "ccloctl: " << flag << status.message() << "\n";
      return 2;  // a bad command line
    }
  }
  request.set_comm_id(comm_id_);
  request.set_collective(static_cast<v1::Collective>(*collective));
  request.set_datatype(static_cast<v1::DataType>(*datatype));
  request.set_bytes(*bytes);
  request.set_world_size(world_size_);
  request.set_transport(transport_);
  request.set_tenant(tenant_);
  request.set_comm_label(label_);
  return Print(admin.Call(&Stub::ExplainPolicy, "ExplainPolicy", request), json,
               [](const v1::ExplainPolicyResponse& response) { return KeyValueTable(response); },
               out, err);
}

}  // namespace cclo::ccloctl
