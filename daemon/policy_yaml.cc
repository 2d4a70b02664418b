#include "daemon/policy_yaml.h"

#include <functional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/policy.h"
#include "daemon/yaml_key.h"

namespace cclo::daemon {
namespace {

using cclo::v1::PolicyRule;

absl::StatusOr<std::string> Scalar(const YAML::Node& node) {
  if (!node.IsScalar()) return absl::InvalidArgumentError("expected a single value");
  return node.Scalar();
}

absl::StatusOr<uint64_t> Bytes(const YAML::Node& node) {
  absl::StatusOr<std::string> text = Scalar(node);
  if (!text.ok()) return text.status();
  return hw::ParseByteSize(*text);
}

/// A {min, max} mapping; `set_min`/`set_max` store the bounds given.
absl::Status ParseRange(const YAML::Node& node, uint64_t max_value,
                        const std::function<void(uint64_t)>& set_min,
                        const std::function<void(uint64_t)>& set_max) {
  if (!node.IsMap()) return absl::InvalidArgumentError("expected a mapping {min: N, max: N}");
  std::set<std::string> seen;
  for (const auto& entry : node) {
    absl::StatusOr<std::string> name = YamlKey(entry.first);
    if (!name.ok()) return name.status();
    const std::string& bound = *name;
    if (bound != "min" && bound != "max") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown bound '", bound, "'; valid: min, max"));
    }
    if (!seen.insert(bound).second) {
      return absl::InvalidArgumentError(absl::StrCat("bound '", bound, "' is given twice"));
    }
    absl::StatusOr<uint64_t> value = Bytes(entry.second);
    if (!value.ok()) return value.status();
    if (*value > max_value) {
      return absl::InvalidArgumentError(absl::StrCat(bound, " ", *value, " exceeds ", max_value));
    }
    (bound == "min" ? set_min : set_max)(*value);
  }
  return absl::OkStatus();
}

using Field = std::function<absl::Status(const YAML::Node&, PolicyRule&)>;

/// Sets a string field of the rule from a scalar.
Field Text(void (PolicyRule::*set)(const std::string&)) {
  return [set](const YAML::Node& node, PolicyRule& rule) -> absl::Status {
    absl::StatusOr<std::string> text = Scalar(node);
    if (!text.ok()) return text.status();
    (rule.*set)(*text);
    return absl::OkStatus();
  };
}

const std::map<std::string, Field>& Fields() {
  static const auto* fields = new std::map<std::string, Field>{
      {"name", Text(&PolicyRule::set_name)},
      {"collective",
       [](const YAML::Node& node, PolicyRule& rule) -> absl::Status {
         absl::StatusOr<std::string> text = Scalar(node);
         if (!text.ok()) return text.status();
         absl::StatusOr<hw::Collective> value = hw::ParseCollective(*text);
         if (!value.ok()) return value.status();
         rule.set_collective(static_cast<cclo::v1::Collective>(*value));
         return absl::OkStatus();
       }},
      {"bytes",
       [](const YAML::Node& node, PolicyRule& rule) {
         return ParseRange(
             node, UINT64_MAX, [&](uint64_t v) { rule.set_min_bytes(v); },
             [&](uint64_t v) { rule.set_max_bytes(v); });
       }},
      {"world_size",
       [](const YAML::Node& node, PolicyRule& rule) {
         return ParseRange(
             node, UINT32_MAX,
             [&](uint64_t v) { rule.set_min_world_size(static_cast<uint32_t>(v)); },
             [&](uint64_t v) { rule.set_max_world_size(static_cast<uint32_t>(v)); });
       }},
      {"transport", Text(&PolicyRule::set_transport)},
      {"datatype",
       [](const YAML::Node& node, PolicyRule& rule) -> absl::Status {
         absl::StatusOr<std::string> text = Scalar(node);
         if (!text.ok()) return text.status();
         absl::StatusOr<hw::DataType> value = hw::ParseDataType(*text);
         if (!value.ok()) return value.status();
         rule.set_datatype(static_cast<cclo::v1::DataType>(*value));
         return absl::OkStatus();
       }},
      {"tenant", Text(&PolicyRule::set_tenant)},
      {"comm_label", Text(&PolicyRule::set_comm_label)},
      {"algorithm", Text(&PolicyRule::set_algorithm)},
      {"protocol", Text(&PolicyRule::set_protocol)},
      {"segment_bytes",
       [](const YAML::Node& node, PolicyRule& rule) -> absl::Status {
         absl::StatusOr<uint64_t> value = Bytes(node);
         if (!value.ok()) return value.status();
         rule.set_segment_bytes(*value);
         return absl::OkStatus();
       }},
  };
  return *fields;
}

absl::StatusOr<PolicyRule> ParseRule(const YAML::Node& node) {
  if (!node.IsMap()) return absl::InvalidArgumentError("a rule must be a mapping");
  PolicyRule rule;
  std::set<std::string> seen;
  for (const auto& entry : node) {
    absl::StatusOr<std::string> name = YamlKey(entry.first);
    if (!name.ok()) return name.status();
    const std::string& key = *name;
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("'", key, "' is given twice"));
    }
    auto field = Fields().find(key);
    if (field == Fields().end()) {
      std::vector<std::string> valid;
      for (const auto& [name, unused] : Fields()) valid.push_back(name);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown key '", key, "'; valid: ", absl::StrJoin(valid, ", ")));
    }
    if (absl::Status status = field->second(entry.second, rule); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("'", key, "': ", status.message()));
    }
  }
  if (!node["collective"]) return absl::InvalidArgumentError("'collective' is required");
  return rule;
}

void EmitRange(YAML::Emitter& out, const char* key, bool has_min, uint64_t min, bool has_max,
               uint64_t max) {
  if (!has_min && !has_max) return;
  out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
  if (has_min) out << YAML::Key << "min" << YAML::Value << min;
  if (has_max) out << YAML::Key << "max" << YAML::Value << max;
  out << YAML::EndMap;
}

}  // namespace

absl::StatusOr<cclo::v1::Policy> ParsePolicy(const YAML::Node& node) {
  if (!node.IsMap()) return absl::InvalidArgumentError("a policy must be a mapping with 'rules'");
  cclo::v1::Policy policy;
  bool rules_seen = false;
  for (const auto& entry : node) {
    absl::StatusOr<std::string> name = YamlKey(entry.first);
    if (!name.ok()) return name.status();
    const std::string& key = *name;
    if (key != "rules") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown policy key '", key, "'; valid: rules"));
    }
    if (std::exchange(rules_seen, true)) {
      return absl::InvalidArgumentError("policy key 'rules' is given twice");
    }
    if (!entry.second.IsSequence()) return absl::InvalidArgumentError("'rules' must be a list");
    for (size_t i = 0; i < entry.second.size(); ++i) {
      absl::StatusOr<PolicyRule> rule = ParseRule(entry.second[i]);
      if (!rule.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("rule ", i + 1, ": ", rule.status().message()));
      }
      *policy.add_rules() = *std::move(rule);
    }
  }
  if (absl::Status valid = ValidatePolicy(policy); !valid.ok()) return valid;
  return policy;
}

absl::StatusOr<cclo::v1::Policy> ParsePolicyText(const std::string& text) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("policy is not valid YAML: ", error.what()));
  }
  return ParsePolicy(node);
}

std::string PolicyYaml(const cclo::v1::Policy& policy) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "rules" << YAML::Value << YAML::BeginSeq;
  for (const PolicyRule& rule : policy.rules()) {
    out << YAML::BeginMap;
    auto text = [&out](const char* key, const std::string& value) {
      if (!value.empty()) out << YAML::Key << key << YAML::Value << value;
    };
    text("name", rule.name());
    text("collective",
         std::string(hw::CollectiveName(static_cast<hw::Collective>(rule.collective()))));
    EmitRange(out, "bytes", rule.has_min_bytes(), rule.min_bytes(), rule.has_max_bytes(),
              rule.max_bytes());
    EmitRange(out, "world_size", rule.has_min_world_size(), rule.min_world_size(),
              rule.has_max_world_size(), rule.max_world_size());
    text("transport", rule.transport());
    if (rule.has_datatype()) {
      text("datatype", std::string(hw::DataTypeName(static_cast<hw::DataType>(rule.datatype()))));
    }
    text("tenant", rule.tenant());
    text("comm_label", rule.comm_label());
    text("algorithm", rule.algorithm());
    text("protocol", rule.protocol());
    if (rule.segment_bytes() != 0) {
      out << YAML::Key << "segment_bytes" << YAML::Value << rule.segment_bytes();
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace cclo::daemon
