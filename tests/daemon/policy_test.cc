// Policies: every invalid policy is rejected with a reason naming the rule and the field;
// valid ones choose the first matching rule, fall back to the built-in selection, survive
// a YAML round trip and get a new version only when they change.
#include "daemon/policy.h"

#include <google/protobuf/util/message_differencer.h>

#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/policy_yaml.h"
#include "firmware/registry.h"
#include "gtest/gtest.h"
#include "hw/poe/wire.h"
#include "tests/fuzz/mutator.h"
#include "yaml-cpp/yaml.h"

namespace cclo::daemon {
namespace {

/// The error ParsePolicyText gives for `yaml`, or "ok".
std::string Error(const std::string& yaml) {
  absl::StatusOr<cclo::v1::Policy> policy = ParsePolicyText(yaml);
  if (policy.ok()) return "ok";
  EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(policy.status().message());
}

cclo::v1::Policy Parse(const std::string& yaml) {
  absl::StatusOr<cclo::v1::Policy> policy = ParsePolicyText(yaml);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return policy.ok() ? *policy : cclo::v1::Policy();
}

TEST(PolicyTest, EveryInvalidPolicyIsRejectedWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rules: [", "policy is not valid YAML"},
      {"[1, 2]", "a policy must be a mapping with 'rules'"},
      {"rule: []", "unknown policy key 'rule'; valid: rules"},
      {"rules: {a: 1}", "'rules' must be a list"},
      {"rules: [7]", "rule 1: a rule must be a mapping"},
      {"rules: [{algorithm: ring}]", "rule 1: 'collective' is required"},
      {"rules: [{collective: allreduc, algorithm: ring}]",
       "rule 1: 'collective': 'allreduc' is not one of send, recv, bcast, allreduce, scatter, "
       "gather, allgather, reduce, reduce_scatter, alltoall, barrier"},
      {"rules: [{collective: allreduce, algorithm: rign}]",
       "rule 1: algorithm 'rign' cannot serve allreduce; valid: ring, recursive_doubling, "
       "reduce_bcast"},
      {"rules: [{collective: bcast, algorithm: ring}]",
       "rule 1: algorithm 'ring' cannot serve bcast; valid: one_to_all, binomial_tree, chain"},
      {"rules: [{collective: allreduce, bytes: {min: 2K, max: 1K}, algorithm: ring}]",
       "rule 1: bytes range [2048, 1024] is empty"},
      {"rules: [{collective: allreduce, world_size: {min: 9, max: 8}, algorithm: ring}]",
       "rule 1: world_size range [9, 8] is empty"},
      {"rules: [{collective: allreduce, world_size: {min: 0}, algorithm: ring}]",
       "rule 1: world_size min 0: a communicator has at least 1 rank"},
      {"rules: [{collective: allreduce, bytes: {least: 1}, algorithm: ring}]",
       "rule 1: 'bytes': unknown bound 'least'; valid: min, max"},
      {"rules: [{collective: allreduce, bytes: {max: lots}, algorithm: ring}]",
       "rule 1: 'bytes': 'lots' is not a byte size (digits with an optional K, M or G)"},
      {"rules: [{collective: allreduce, protocol: smoke}]",
       "rule 1: protocol 'smoke' is not one of eager, rendezvous"},
      {"rules: [{collective: allreduce, transport: ib, algorithm: ring}]",
       "rule 1: transport 'ib' is not one of local, tcp"},
      {"rules: [{collective: allreduce, datatype: float128, algorithm: ring}]",
       "rule 1: 'datatype': 'float128' is not one of int8, uint8, int32, int64, float16, "
       "bfloat16, float32, float64"},
      {"rules: [{collective: allreduce, segment_bytes: 1000}]",
       "rule 1: segment_bytes 1000 is not a multiple of 8 in [4096, 16777216]"},
      {"rules: [{collective: allreduce, segment_bytes: 32M}]",
       "rule 1: segment_bytes 33554432 is not a multiple of 8 in [4096, 16777216]"},
      {"rules: [{collective: allreduce, tenant: ml}]",
       "rule 1: chooses nothing: set algorithm, protocol or segment_bytes"},
      {"rules: [{collective: allreduce, algorithm: ring, algorithm: chain}]",
       "rule 1: 'algorithm' is given twice"},
      {"rules: [{collective: allreduce, bytes: {max: 64K, max: 1G}, algorithm: ring}]",
       "rule 1: 'bytes': bound 'max' is given twice"},
      {"rules: [{collective: allreduce, algorithm: ring}]\nrules: []",
       "policy key 'rules' is given twice"},
      {"rules: [{collective: allreduce, algorithm: ring, [a]: 1}]",
       "rule 1: key '[a]' is not a plain name"},
      {"{[rules]: []}", "key '[rules]' is not a plain name"},
      {"rules: [{collective: allreduce, bytes: {{min: 1}: 2}, algorithm: ring}]",
       "rule 1: 'bytes': key '{min: 1}' is not a plain name"},
      {"rules: [{collective: allreduce, algorithm: ring, colour: red}]",
       "rule 1: unknown key 'colour'; valid: algorithm, bytes, collective, comm_label, datatype, "
       "name, protocol, segment_bytes, tenant, transport, world_size"},
      {"rules: [{collective: allreduce, algorithm: ring, comm_label: 'a b'}]",
       "rule 1: comm_label 'a b' is not 1 to 64 of a-z, A-Z, 0-9, '_', '.' and '-'"},
      {"rules: [{collective: allreduce, algorithm: ring, tenant: ML}]",
       "rule 1: tenant 'ML' is not 1 to 32 characters of a-z, 0-9, _ and -"},
      {"rules: [{name: x, collective: allreduce, algorithm: ring},"
       " {name: x, collective: bcast, algorithm: chain}]",
       "rule 2 ('x'): the name is used by an earlier rule"},
      // A later rule that can never match.
      {"rules: [{collective: allreduce, algorithm: ring},"
       " {collective: allreduce, bytes: {max: 1K}, algorithm: recursive_doubling}]",
       "rule 2 is never used: rule 1 comes first and matches every op it does"},
      {"rules: [{collective: allreduce, bytes: {max: 1M}, algorithm: ring},"
       " {collective: allreduce, bytes: {max: 1M}, tenant: ml, algorithm: recursive_doubling}]",
       "rule 2 is never used: rule 1 comes first and matches every op it does"},
      // Ranges that overlap without one containing the other.
      {"rules: [{name: small, collective: allreduce, bytes: {max: 64K}, algorithm: ring},"
       " {name: mid, collective: allreduce, bytes: {min: 32K, max: 1M}, algorithm: reduce_bcast}]",
       "rule 1 ('small') and rule 2 ('mid') overlap: bytes [0, 65536] and [32768, 1048576], world "
       "sizes [1, any] and [1, any]; make their ranges disjoint, or the later one contain the "
       "earlier"},
  };
  for (const auto& [yaml, reason] : cases) {
    const std::string error = Error(yaml);
    EXPECT_EQ(error.substr(0, reason.size()), reason) << yaml;
  }
}

TEST(PolicyTest, TenantsMustBeConfigured) {
  const cclo::v1::Policy policy =
      Parse("rules: [{collective: allreduce, tenant: mll, algorithm: ring}]");
  EXPECT_EQ(CheckPolicyTenants(policy, {"default", "ml"}).message(),
            "rule 1: tenant 'mll' is not configured (tenants: default, ml)");
  EXPECT_TRUE(CheckPolicyTenants(policy, {"mll"}).ok());
}

const char kRules[] = R"(rules:
  - name: small-ml
    collective: allreduce
    bytes: {max: 64K}
    tenant: ml
    algorithm: reduce_bcast
  - name: small
    collective: allreduce
    bytes: {max: 64K}
    protocol: rendezvous
  - name: training
    collective: allreduce
    comm_label: training
    transport: tcp
    world_size: {min: 2, max: 8}
    datatype: float32
    algorithm: ring
    segment_bytes: 256K
)";

TEST(PolicyTest, FirstMatchingRuleWinsAndTheBuiltInFillsTheRest) {
  const cclo::v1::Policy policy = Parse(kRules);
  PolicyQuery query{.collective = hw::Collective::kAllreduce,
                    .datatype = hw::DataType::kFloat32,
                    .bytes = 4096,
                    .world_size = 4,
                    .transport = "tcp",
                    .tenant = "ml",
                    .comm_label = "training"};
  PolicyChoice choice = Choose(policy, query);
  EXPECT_EQ(choice.rule, "small-ml");
  EXPECT_EQ(choice.rule_index, 1u);
  EXPECT_EQ(choice.algorithm, "reduce_bcast");
  EXPECT_EQ(choice.protocol, hw::Protocol::kEager);

  query.tenant = "default";
  choice = Choose(policy, query);
  EXPECT_EQ(choice.rule, "small");
  // No algorithm in the rule: the built-in one for 4 KiB on 4 ranks.
  EXPECT_EQ(choice.algorithm, "recursive_doubling");
  EXPECT_EQ(choice.protocol, hw::Protocol::kRendezvous);

  query.bytes = 1 << 20;
  choice = Choose(policy, query);
  EXPECT_EQ(choice.rule, "training");
  EXPECT_EQ(choice.algorithm, "ring");
  EXPECT_EQ(choice.segment_bytes, 256u << 10);

  for (auto change : std::vector<std::function<void(PolicyQuery&)>>{
           [](PolicyQuery& q) { q.transport = "local"; },
           [](PolicyQuery& q) { q.comm_label = "eval"; }, [](PolicyQuery& q) { q.world_size = 9; },
           [](PolicyQuery& q) { q.datatype = hw::DataType::kFloat64; },
           [](PolicyQuery& q) { q.collective = hw::Collective::kBcast; }}) {
    PolicyQuery other = query;
    change(other);
    choice = Choose(policy, other);
    EXPECT_EQ(choice.rule, "built-in");
    EXPECT_EQ(choice.rule_index, 0u);
    EXPECT_EQ(choice.segment_bytes, 0u);
    EXPECT_FALSE(choice.algorithm.empty());
  }
}

TEST(PolicyTest, YamlRoundTrip) {
  const cclo::v1::Policy policy = Parse(kRules);
  ASSERT_EQ(policy.rules_size(), 3);
  const cclo::v1::Policy again = Parse(PolicyYaml(policy));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(policy, again))
      << PolicyYaml(policy);
  EXPECT_EQ(Parse(PolicyYaml(cclo::v1::Policy())).rules_size(), 0);
  EXPECT_EQ(Parse("rules: []").rules_size(), 0);
}

TEST(PolicyTest, StoreCountsVersionsOfChanges) {
  PolicyStore store(cclo::v1::Policy{});
  EXPECT_EQ(store.Current()->version(), 1u);
  EXPECT_EQ(store.Replace(cclo::v1::Policy{}), 1u);
  const cclo::v1::Policy policy = Parse(kRules);
  EXPECT_EQ(store.Replace(policy), 2u);
  EXPECT_EQ(store.Replace(policy), 2u);
  EXPECT_EQ(store.Current()->rules_size(), 3);
  EXPECT_EQ(store.Replace(cclo::v1::Policy{}), 3u);
}

/// What every policy the parser accepts satisfies (policy.h, ValidatePolicy; the rule
/// form in policy_yaml.h), checked field by field.
void ExpectWithinBounds(const cclo::v1::Policy& policy) {
  auto one_of = [](const std::string& value, std::set<std::string> valid) {
    return valid.contains(value);
  };
  auto name_like = [](const std::string& text, size_t max, const char* allowed) {
    return !text.empty() && text.size() <= max &&
           text.find_first_not_of(allowed) == std::string::npos;
  };
  constexpr char kLabel[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
  const std::string yaml = PolicyYaml(policy);
  std::set<std::string> names;
  for (const cclo::v1::PolicyRule& rule : policy.rules()) {
    EXPECT_GT(rule.collective(), static_cast<int>(hw::Collective::kNop)) << yaml;
    EXPECT_LE(rule.collective(), static_cast<int>(hw::kLastCollective)) << yaml;
    const auto collective = static_cast<hw::Collective>(rule.collective());
    if (!rule.algorithm().empty()) {
      EXPECT_NE(firmware::Find(collective, rule.algorithm()), nullptr) << yaml;
    }
    EXPECT_TRUE(one_of(rule.protocol(), {"", "eager", "rendezvous"})) << yaml;
    EXPECT_TRUE(one_of(rule.transport(), {"", kLocalTransport, kTcpTransport})) << yaml;
    if (rule.has_datatype()) {
      EXPECT_LE(rule.datatype(), static_cast<int>(hw::DataType::kFloat64)) << yaml;
    }
    if (rule.segment_bytes() != 0) {
      EXPECT_GE(rule.segment_bytes(), hw::poe::kMinSegmentBytes) << yaml;
      EXPECT_LE(rule.segment_bytes(), hw::poe::kMaxSegmentBytes) << yaml;
      EXPECT_EQ(rule.segment_bytes() % 8, 0u) << yaml;
    }
    EXPECT_FALSE(rule.algorithm().empty() && rule.protocol().empty() && rule.segment_bytes() == 0)
        << yaml;
    if (rule.has_min_bytes() && rule.has_max_bytes()) {
      EXPECT_LE(rule.min_bytes(), rule.max_bytes()) << yaml;
    }
    if (rule.has_min_world_size()) EXPECT_GE(rule.min_world_size(), 1u) << yaml;
    if (rule.has_min_world_size() && rule.has_max_world_size()) {
      EXPECT_LE(rule.min_world_size(), rule.max_world_size()) << yaml;
    }
    if (!rule.name().empty()) {
      EXPECT_TRUE(name_like(rule.name(), 64, kLabel)) << yaml;
      EXPECT_TRUE(names.insert(rule.name()).second) << yaml;
    }
    if (!rule.tenant().empty()) {
      EXPECT_TRUE(name_like(rule.tenant(), 32, "abcdefghijklmnopqrstuvwxyz0123456789_-")) << yaml;
    }
    if (!rule.comm_label().empty()) EXPECT_TRUE(name_like(rule.comm_label(), 64, kLabel)) << yaml;
  }
}

/// A byte size as policy_yaml.h writes them (digits, then K, M or G for powers of 1024);
/// nullopt for anything else or more than 64 bits. The test's own reading.
std::optional<uint64_t> ByteSize(const YAML::Node& node) {
  std::string text = node.IsScalar() ? node.Scalar() : "";
  absl::uint128 unit = 1;
  if (!text.empty()) {
    const auto suffix = std::string_view("KMG").find(
        static_cast<char>(std::toupper(static_cast<unsigned char>(text.back()))));
    if (suffix != std::string_view::npos) {
      unit = absl::uint128(1) << (10 * (suffix + 1));
      text.pop_back();
    }
  }
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  absl::uint128 value = 0;
  for (char digit : text) {
    value = value * 10 + (digit - '0');
    if (value > UINT64_MAX) return std::nullopt;
  }
  value *= unit;
  if (value > UINT64_MAX) return std::nullopt;
  return static_cast<uint64_t>(value);
}

/// Every value of an accepted policy is the one its YAML gives.
void ExpectAsWritten(const cclo::v1::Policy& policy, const std::string& yaml) {
  const YAML::Node rules = YAML::Load(yaml)["rules"];
  ASSERT_EQ(rules.size(), static_cast<size_t>(policy.rules_size())) << yaml;
  for (int i = 0; i < policy.rules_size(); ++i) {
    const cclo::v1::PolicyRule& rule = policy.rules(i);
    for (const auto& entry : rules[i]) {
      const std::string key = entry.first.Scalar();
      const YAML::Node& value = entry.second;
      if (key == "bytes" || key == "world_size") {
        for (const auto& bound : value) {
          const bool min = bound.first.Scalar() == "min";
          const uint64_t parsed = key == "bytes"
                                      ? (min ? rule.min_bytes() : rule.max_bytes())
                                      : (min ? rule.min_world_size() : rule.max_world_size());
          EXPECT_EQ(ByteSize(bound.second), parsed) << key << " of\n" << yaml;
        }
      } else if (key == "segment_bytes") {
        EXPECT_EQ(ByteSize(value), rule.segment_bytes()) << yaml;
      } else if (key == "collective") {
        EXPECT_EQ(value.Scalar(),
                  hw::CollectiveName(static_cast<hw::Collective>(rule.collective())))
            << yaml;
      } else if (key == "datatype") {
        EXPECT_EQ(value.Scalar(), hw::DataTypeName(static_cast<hw::DataType>(rule.datatype())))
            << yaml;
      } else {  // a string field of the same name
        const google::protobuf::FieldDescriptor* field = rule.GetDescriptor()->FindFieldByName(key);
        ASSERT_NE(field, nullptr) << key;
        EXPECT_EQ(value.Scalar(), rule.GetReflection()->GetString(rule, field)) << yaml;
      }
    }
  }
}

/// A rule's YAML entries: valid values but for at most one fault in the policy (a value at,
/// past or around a bound, a key too many), so that a fault accepted shows. Quoted now and
/// then.
std::vector<std::string> RandomRule(testing::Mutator& random, int index) {
  // Each list: the valid values, then the others.
  using Values = std::pair<std::vector<std::string>, std::vector<std::string>>;
  static const auto* kByteSizes = new Values{
      {"0", "1", "7", "64K", "64k", "1M", "1m", "1G", "16G", "4096", "16M", "18446744073709551615"},
      {"18446744073709551616", "17179869184G", "-1", "0x10", "1.5", "010", "K", "~", "[1]",
       "{a: 1}", "''"}};
  static const auto* kSegmentBytes =
      new Values{{"4K", "4096", "4104", "256K", "16M", "16777216"},
                 {"0", "4100", "1000", "16777224", "32M", "18446744073709551615K", "-8", "4k "}};
  static const auto* kWorldSizes = new Values{{"1", "2", "3", "8", "4294967295"},
                                              {"0", "4294967296", "4294967298", "-1", "4G", "~"}};
  // Valid as names, tenants and labels alike; "null" and "-" only quoted (YAML would read
  // a null and a list).
  static const auto* kNames =
      new Values{{"ml", "'null'", "true", "no", "'-'", ".", "..", "-1", "1e3", ".inf", "0x1F",
                  "a-b_c.d", std::string(32, 'x')},
                 {"null", "-", "NULL", "Null", "ML", "a b", "a:b", "#x", std::string(33, 'x'),
                  std::string(64, 'y'), std::string(65, 'y'), "", "~", "[x]", "\\x01"}};
  auto value = [&random](const Values& of) {
    std::string chosen = random.Fault() ? random.Pick(of.second) : random.Pick(of.first);
    return random.OneIn(4) && chosen[0] != '\'' ? absl::StrCat("'", chosen, "'") : chosen;
  };
  auto any_collective = [&random] {
    return static_cast<hw::Collective>(1 + random.Below(static_cast<int>(hw::kLastCollective)));
  };
  std::vector<std::string> entries;
  const hw::Collective collective = any_collective();
  entries.push_back(
      absl::StrCat("collective: ", value({{std::string(hw::CollectiveName(collective))},
                                          {"nop", "allreduc", "", "[bcast]", "ALLREDUCE"}})));
  if (!random.OneIn(8)) {
    std::vector<const firmware::Algorithm*> algorithms =
        firmware::ForCollective(random.Fault() ? any_collective() : collective);
    entries.push_back(absl::StrCat("algorithm: ",
                                   std::string(algorithms[random.Below(algorithms.size())]->name)));
  }
  if (random.OneIn(3)) {
    entries.push_back("protocol: " + value({{"eager", "rendezvous"}, {"smoke", "EAGER", "''"}}));
  }
  if (random.OneIn(4)) entries.push_back("segment_bytes: " + value(*kSegmentBytes));
  for (const auto& [key, values] : {std::pair{"bytes", kByteSizes}, {"world_size", kWorldSizes}}) {
    if (!random.OneIn(3)) continue;
    std::vector<std::string> bounds;
    if (!random.OneIn(3)) bounds.push_back("min: " + value(*values));
    if (!random.OneIn(3)) bounds.push_back("max: " + value(*values));
    entries.push_back(absl::StrCat(key, ": {", absl::StrJoin(bounds, ", "), "}"));
  }
  if (random.OneIn(4)) entries.push_back("transport: " + value({{"local", "tcp"}, {"ib", "TCP"}}));
  if (random.OneIn(4)) {
    entries.push_back(
        "datatype: " +
        value({{std::string(hw::DataTypeName(static_cast<hw::DataType>(random.Below(8))))},
               {"float128", "fp32"}}));
  }
  if (random.OneIn(4)) entries.push_back("tenant: " + value(*kNames));
  if (random.OneIn(4)) entries.push_back("comm_label: " + value(*kNames));
  if (random.OneIn(2)) {
    entries.push_back(
        absl::StrCat("name: ", random.OneIn(3) ? value(*kNames) : absl::StrCat("rule-", index)));
  }
  if (random.Fault()) entries.push_back("colour: red");
  if (random.Fault()) entries.push_back(entries[random.Below(entries.size())]);
  random.Shuffle(entries);  // keys in any order
  return entries;
}

/// A policy of 0 to 3 random rules, each a flow or a block mapping.
std::string RandomPolicy(testing::Mutator& random) {
  random.AimFault(12);
  const int rules = static_cast<int>(random.Below(4));
  std::string yaml = rules == 0 ? "rules: []\n" : "rules:\n";
  for (int i = 0; i < rules; ++i) {
    const std::vector<std::string> entries = RandomRule(random, i);
    if (random.OneIn(2)) {
      absl::StrAppend(&yaml, "  - {", absl::StrJoin(entries, ", "), "}\n");
    } else {
      absl::StrAppend(&yaml, "  - ", absl::StrJoin(entries, "\n    "), "\n");
    }
  }
  return yaml;
}

TEST(PolicyTest, RandomTextIsRejectedWithTheReasonOrRoundTrips) {
  testing::Mutator random(11);
  const std::vector<std::string> tokens = testing::Mutator::YamlTokens(
      {"K", "G", "rules", "collective: ", "algorithm: ", "bytes: {min: 1, max: 2}", "world_size: ",
       "tenant: ", "comm_label: ", "name: ", "segment_bytes: ", "protocol: ", "allreduce", "ring",
       "eager"});
  int accepted = 0, rules = 0;
  constexpr int kRounds = 6000;
  for (int round = 0; round < kRounds; ++round) {
    std::string yaml = round % 2 == 0 ? RandomPolicy(random) : kRules;
    if (round % 2 == 1 || random.OneIn(4)) random.EditText(yaml, tokens);
    absl::StatusOr<cclo::v1::Policy> policy = ParsePolicyText(yaml);
    if (!policy.ok()) {
      EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument) << yaml;
      EXPECT_FALSE(policy.status().message().empty()) << yaml;
      continue;
    }
    ++accepted;
    rules += policy->rules_size();
    ExpectWithinBounds(*policy);
    ExpectAsWritten(*policy, yaml);
    // What `ccloctl policy get` prints, `ccloctl policy set` takes back unchanged.
    const std::string printed = PolicyYaml(*policy);
    absl::StatusOr<cclo::v1::Policy> again = ParsePolicyText(printed);
    ASSERT_TRUE(again.ok()) << again.status() << "\nfrom:\n" << yaml << "printed:\n" << printed;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*policy, *again))
        << yaml << "printed:\n"
        << printed;
  }
  // Enough of them pass to say something of what passes.
  EXPECT_GT(accepted, kRounds / 10);
  EXPECT_GT(rules, kRounds / 10);
}

}  // namespace
}  // namespace cclo::daemon
