// Policies: every invalid policy is rejected with a reason naming the rule and the field;
// valid ones choose the first matching rule, fall back to the built-in selection, survive
// a YAML round trip and get a new version only when they change.
#include "daemon/policy.h"

#include <google/protobuf/util/message_differencer.h>

#include <string>
#include <utility>
#include <vector>

#include "daemon/policy_yaml.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace cclo::daemon
