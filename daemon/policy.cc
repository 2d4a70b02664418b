#include "daemon/policy.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "firmware/registry.h"
#include "hw/poe/wire.h"
#include "hw/types.h"

namespace cclo::daemon {
namespace {

using cclo::v1::PolicyRule;

/// An inclusive range; an unset bound is open.
struct Range {
  uint64_t min = 0;
  uint64_t max = UINT64_MAX;
  bool Contains(uint64_t value) const { return value >= min && value <= max; }
  bool Contains(const Range& other) const { return other.min >= min && other.max <= max; }
  bool Meets(const Range& other) const { return other.min <= max && min <= other.max; }
};

Range BytesOf(const PolicyRule& rule) {
  return {rule.has_min_bytes() ? rule.min_bytes() : 0,
          rule.has_max_bytes() ? rule.max_bytes() : UINT64_MAX};
}

Range WorldOf(const PolicyRule& rule) {
  return {rule.has_min_world_size() ? rule.min_world_size() : 1,
          rule.has_max_world_size() ? rule.max_world_size() : UINT64_MAX};
}

std::string Describe(const Range& range) {
  return absl::StrCat("[", range.min, ", ",
                      range.max == UINT64_MAX ? "any" : absl::StrCat(range.max), "]");
}

std::string Label(const cclo::v1::Policy& policy, int index) {
  const std::string& name = policy.rules(index).name();
  return name.empty() ? absl::StrCat("rule ", index + 1)
                      : absl::StrCat("rule ", index + 1, " ('", hw::EscapeControl(name), "')");
}

/// True when every op `inner` matches on its non-range fields `outer` matches too.
bool FieldsCover(const PolicyRule& outer, const PolicyRule& inner) {
  auto covers = [](const std::string& a, const std::string& b) { return a.empty() || a == b; };
  return outer.collective() == inner.collective() && covers(outer.transport(), inner.transport()) &&
         (!outer.has_datatype() || (inner.has_datatype() && outer.datatype() == inner.datatype())) &&
         covers(outer.tenant(), inner.tenant()) && covers(outer.comm_label(), inner.comm_label());
}

bool SameFields(const PolicyRule& a, const PolicyRule& b) {
  return FieldsCover(a, b) && FieldsCover(b, a);
}

bool NameLike(const std::string& text, size_t max, const char* allowed) {
  return !text.empty() && text.size() <= max && text.find_first_not_of(allowed) == std::string::npos;
}

constexpr char kLabelCharacters[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";

/// The checks of one rule on its own.
absl::Status CheckRule(const PolicyRule& rule) {
  const int collective = rule.collective();
  if (collective <= static_cast<int>(hw::Collective::kNop) ||
      collective > static_cast<int>(hw::kLastCollective)) {
    return absl::InvalidArgumentError(absl::StrCat("collective ", collective, " is not one a policy can choose for"));
  }
  const auto which = static_cast<hw::Collective>(collective);
  if (!rule.algorithm().empty() && firmware::Find(which, rule.algorithm()) == nullptr) {
    std::vector<std::string> valid;
    for (const firmware::Algorithm* algorithm : firmware::ForCollective(which)) {
      valid.emplace_back(algorithm->name);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "algorithm '", hw::EscapeControl(rule.algorithm()), "' cannot serve ",
        std::string(hw::CollectiveName(which)), "; valid: ", absl::StrJoin(valid, ", ")));
  }
  if (!rule.protocol().empty() && rule.protocol() != hw::ProtocolName(hw::Protocol::kEager) &&
      rule.protocol() != hw::ProtocolName(hw::Protocol::kRendezvous)) {
    return absl::InvalidArgumentError(absl::StrCat("protocol '", hw::EscapeControl(rule.protocol()),
                                                   "' is not one of eager, rendezvous"));
  }
  if (!rule.transport().empty() && rule.transport() != kLocalTransport &&
      rule.transport() != kTcpTransport) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport '", hw::EscapeControl(rule.transport()), "' is not one of local, tcp"));
  }
  if (rule.has_datatype() && (rule.datatype() < 0 ||
                              rule.datatype() > static_cast<int>(hw::DataType::kFloat64))) {
    return absl::InvalidArgumentError(absl::StrCat("datatype ", rule.datatype(), " is unknown"));
  }
  if (rule.segment_bytes() != 0 &&
      (rule.segment_bytes() < hw::poe::kMinSegmentBytes ||
       rule.segment_bytes() > hw::poe::kMaxSegmentBytes || rule.segment_bytes() % 8 != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment_bytes ", rule.segment_bytes(), " is not a multiple of 8 in [",
                     hw::poe::kMinSegmentBytes, ", ", hw::poe::kMaxSegmentBytes, "]"));
  }
  if (rule.algorithm().empty() && rule.protocol().empty() && rule.segment_bytes() == 0) {
    return absl::InvalidArgumentError("chooses nothing: set algorithm, protocol or segment_bytes");
  }
  if (BytesOf(rule).min > BytesOf(rule).max) {
    return absl::InvalidArgumentError(
        absl::StrCat("bytes range ", Describe(BytesOf(rule)), " is empty"));
  }
  if (rule.has_min_world_size() && rule.min_world_size() == 0) {
    return absl::InvalidArgumentError("world_size min 0: a communicator has at least 1 rank");
  }
  if (WorldOf(rule).min > WorldOf(rule).max) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size range ", Describe(WorldOf(rule)), " is empty"));
  }
  if (!rule.name().empty() && !NameLike(rule.name(), 64, kLabelCharacters)) {
    return absl::InvalidArgumentError(
        absl::StrCat("name '", hw::EscapeControl(rule.name()),
                     "' is not 1 to 64 of a-z, A-Z, 0-9, '_', '.' and '-'"));
  }
  if (!rule.comm_label().empty() && !ValidLabel(rule.comm_label())) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm_label '", hw::EscapeControl(rule.comm_label()),
                     "' is not 1 to 64 of a-z, A-Z, 0-9, '_', '.' and '-'"));
  }
  if (!rule.tenant().empty() &&
      !NameLike(rule.tenant(), 32, "abcdefghijklmnopqrstuvwxyz0123456789_-")) {
    return absl::InvalidArgumentError(
        absl::StrCat("tenant '", hw::EscapeControl(rule.tenant()),
                     "' is not 1 to 32 characters of a-z, 0-9, _ and -"));
  }
  return absl::OkStatus();
}

/// Rule `later` against the earlier rule `earlier`: it may not be hidden by it.
absl::Status CheckOrder(const cclo::v1::Policy& policy, int earlier, int later) {
  const PolicyRule& a = policy.rules(earlier);
  const PolicyRule& b = policy.rules(later);
  const Range bytes_a = BytesOf(a), bytes_b = BytesOf(b);
  const Range world_a = WorldOf(a), world_b = WorldOf(b);
  if (FieldsCover(a, b) && bytes_a.Contains(bytes_b) && world_a.Contains(world_b)) {
    return absl::InvalidArgumentError(absl::StrCat(Label(policy, later), " is never used: ",
                                                   Label(policy, earlier),
                                                   " comes first and matches every op it does"));
  }
  if (SameFields(a, b) && bytes_a.Meets(bytes_b) && world_a.Meets(world_b) &&
      !(bytes_b.Contains(bytes_a) && world_b.Contains(world_a))) {
    return absl::InvalidArgumentError(absl::StrCat(
        Label(policy, earlier), " and ", Label(policy, later), " overlap: bytes ",
        Describe(bytes_a), " and ", Describe(bytes_b), ", world sizes ", Describe(world_a),
        " and ", Describe(world_b), "; make their ranges disjoint, or the later one contain "
        "the earlier"));
  }
  return absl::OkStatus();
}

}  // namespace

bool ValidLabel(const std::string& label) { return NameLike(label, 64, kLabelCharacters); }

absl::Status ValidatePolicy(const cclo::v1::Policy& policy) {
  std::set<std::string> names;
  for (int i = 0; i < policy.rules_size(); ++i) {
    const PolicyRule& rule = policy.rules(i);
    absl::Status status = CheckRule(rule);
    if (status.ok() && !rule.name().empty() && !names.insert(rule.name()).second) {
      status = absl::InvalidArgumentError("the name is used by an earlier rule");
    }
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(Label(policy, i), ": ", status.message()));
    }
    for (int earlier = 0; earlier < i; ++earlier) {
      if (absl::Status order = CheckOrder(policy, earlier, i); !order.ok()) return order;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPolicyTenants(const cclo::v1::Policy& policy,
                                const std::vector<std::string>& tenants) {
  for (int i = 0; i < policy.rules_size(); ++i) {
    const std::string& tenant = policy.rules(i).tenant();
    if (!tenant.empty() && std::find(tenants.begin(), tenants.end(), tenant) == tenants.end()) {
      return absl::InvalidArgumentError(absl::StrCat(Label(policy, i), ": tenant '", tenant,
                                                     "' is not configured (tenants: ",
                                                     absl::StrJoin(tenants, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

PolicyStore::PolicyStore(cclo::v1::Policy rules) {
  rules.set_version(1);
  current_ = std::make_shared<const cclo::v1::Policy>(std::move(rules));
}

PolicyPtr PolicyStore::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

uint64_t PolicyStore::Replace(cclo::v1::Policy rules) {
  absl::MutexLock lock(&mu_);
  rules.set_version(current_->version());
  if (google::protobuf::util::MessageDifferencer::Equals(rules, *current_)) {
    return current_->version();
  }
  rules.set_version(current_->version() + 1);
  current_ = std::make_shared<const cclo::v1::Policy>(std::move(rules));
  return current_->version();
}

PolicyChoice Choose(const cclo::v1::Policy& policy, const PolicyQuery& query) {
  PolicyChoice choice;
  choice.rule = "built-in";
  for (int i = 0; i < policy.rules_size(); ++i) {
    const PolicyRule& rule = policy.rules(i);
    auto matches = [](const std::string& want, std::string_view have) {
      return want.empty() || want == have;
    };
    if (rule.collective() != static_cast<int>(query.collective) ||
        !BytesOf(rule).Contains(query.bytes) || !WorldOf(rule).Contains(query.world_size) ||
        !matches(rule.transport(), query.transport) ||
        (rule.has_datatype() && rule.datatype() != static_cast<int>(query.datatype)) ||
        !matches(rule.tenant(), query.tenant) || !matches(rule.comm_label(), query.comm_label)) {
      continue;
    }
    choice.algorithm = rule.algorithm();
    if (rule.protocol() == hw::ProtocolName(hw::Protocol::kRendezvous)) {
      choice.protocol = hw::Protocol::kRendezvous;
    }
    choice.segment_bytes = rule.segment_bytes();
    choice.rule_index = static_cast<uint32_t>(i + 1);
    choice.rule = rule.name().empty() ? absl::StrCat("rule ", i + 1) : rule.name();
    break;
  }
  if (choice.algorithm.empty()) {
    choice.algorithm =
        std::string(firmware::DefaultFor(query.collective, query.bytes, query.world_size).name);
  }
  return choice;
}

PolicyChoice ChooseFor(const cclo::v1::CommPolicy& comm, hw::Collective collective,
                       hw::DataType datatype, uint64_t bytes, uint32_t world_size) {
  return Choose(comm.policy(), {.collective = collective,
                                .datatype = datatype,
                                .bytes = bytes,
                                .world_size = world_size,
                                .transport = comm.transport(),
                                .tenant = comm.tenant(),
                                .comm_label = comm.comm_label()});
}

}  // namespace cclo::daemon
