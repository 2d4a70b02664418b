// Policies on running daemons: ops report what chose their algorithm and explain says the
// same; two daemons with different policies agree within a communicator (the root's
// snapshot rules); `ccloctl policy set` replaces the policy for new communicators only and
// keeps the old one on any invalid file; SIGHUP applies the config's policy, or keeps the
// running one when the file is bad; reloads on either daemon, with an op in flight, leave
// every communicator its root's snapshot.
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "cclo/client.h"
#include "cclo/v1/admin.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace cclo::testing {
namespace {

// Small allreduces take reduce_bcast and go rendezvous; big ones of communicators labelled
// "training" take ring with 64 KiB segments; the rest is built-in.
const char kRootPolicy[] = R"(policy:
  rules:
    - name: small
      collective: allreduce
      bytes: {max: 4K}
      algorithm: reduce_bcast
      protocol: rendezvous
    - name: training
      collective: allreduce
      comm_label: training
      algorithm: ring
      segment_bytes: 64K
)";

// The other daemon would choose recursive doubling for every allreduce.
const char kOtherPolicy[] = R"(policy:
  rules:
    - name: everything
      collective: allreduce
      algorithm: recursive_doubling
)";

template <typename Message>
Message FromJson(const ProcessResult& result) {
  Message message;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.output, &message).ok())
      << result.output;
  return message;
}

v1::ExplainPolicyResponse Explain(const Daemon& daemon, const std::string& comm,
                                  const std::string& bytes) {
  return FromJson<v1::ExplainPolicyResponse>(Ccloctl(
      daemon, {"--json", "policy", "explain", "--comm", comm, "--op", "allreduce", "--bytes",
               bytes}));
}

uint64_t Version(const Daemon& daemon) {
  return FromJson<v1::GetPolicyResponse>(Ccloctl(daemon, {"--json", "policy", "get"}))
      .policy()
      .version();
}

/// Writes `daemon`'s config with `policy` (a config `policy:` key) in place of the one it
/// has, sends SIGHUP and waits until the daemon says `outcome`.
bool ReloadPolicy(Daemon& daemon, const std::string& policy, const std::string& outcome) {
  const std::string path = daemon.runtime_dir() + "/../cclod.yaml";
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  const std::string config = text.str();
  std::ofstream(path) << config.substr(0, config.find("policy:")) << policy;
  const std::string output = daemon.process().Output();
  daemon.process().Signal(SIGHUP);
  return WaitUntil(
      [&] {
        const std::string now = daemon.process().Output();
        return now.size() > output.size() && absl::StrContains(now.substr(output.size()), outcome);
      },
      absl::Seconds(10));
}

/// One rank of a communicator: its client, communicator and two float buffers.
struct Rank {
  std::unique_ptr<Client> client;
  std::unique_ptr<Communicator> comm;
  std::optional<Buffer> send, recv;
};

/// Joins a 2-rank communicator with rank 0 on `root` (which makes the token, with
/// `label`) and rank 1 on `other`.
std::vector<Rank> Join(const Daemon& root, const Daemon& other, const std::string& label) {
  std::vector<Rank> ranks(2);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Attach((i == 0 ? root : other).runtime_dir());
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return {};
    ranks[i].client = *std::move(client);
  }
  absl::StatusOr<std::string> token = ranks[0].client->CreateCommunicatorId(label);
  EXPECT_TRUE(token.ok()) << token.status();
  if (!token.ok()) return {};
  absl::StatusOr<std::unique_ptr<Communicator>> second;
  std::thread joiner([&] { second = ranks[1].client->Join(*token, 1, 2); });
  absl::StatusOr<std::unique_ptr<Communicator>> first = ranks[0].client->Join(*token, 0, 2);
  joiner.join();
  EXPECT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  if (!first.ok() || !second.ok()) return {};
  ranks[0].comm = *std::move(first);
  ranks[1].comm = *std::move(second);
  for (Rank& rank : ranks) {
    rank.send = *rank.client->AllocBuffer(4 << 20);
    rank.recv = *rank.client->AllocBuffer(4 << 20);
  }
  return ranks;
}

/// What one allreduce of `count` floats ran as, on each rank (with the sum checked).
std::vector<Request> Allreduce(std::vector<Rank>& ranks, uint64_t count) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    float* data = static_cast<float*>(ranks[i].send->data());
    for (uint64_t k = 0; k < count; ++k) data[k] = static_cast<float>(i + 1);
  }
  std::vector<Request> requests;
  for (Rank& rank : ranks) {
    absl::StatusOr<Request> request = rank.comm->AllreduceAsync(
        *rank.send, *rank.recv, count, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_TRUE(request.ok()) << request.status();
    if (request.ok()) requests.push_back(*std::move(request));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(requests[i].Wait().ok());
    const float* result = static_cast<const float*>(ranks[i].recv->data());
    EXPECT_EQ(result[0], 3.0f);
    EXPECT_EQ(result[count - 1], 3.0f);
  }
  return requests;
}

TEST(PolicyTest, RanksFollowTheRootsSnapshotAndExplainSaysWhatRan) {
  Daemon root(kRootPolicy);
  Daemon other(kOtherPolicy);
  std::vector<Rank> ranks = Join(root, other, "training");
  ASSERT_EQ(ranks.size(), 2u);
  const std::string comm = ranks[0].comm->id_hex();

  struct Case {
    uint64_t count;
    std::string bytes, rule, algorithm, protocol;
    uint64_t segment;
  };
  for (const Case& want : {Case{256, "1K", "small", "reduce_bcast", "rendezvous", 0},
                           Case{1 << 18, "1M", "training", "ring", "eager", 64 << 10}}) {
    std::vector<Request> ran = Allreduce(ranks, want.count);
    ASSERT_EQ(ran.size(), 2u);
    for (const Request& request : ran) {
      EXPECT_EQ(request.chosen_by(), want.rule);
      EXPECT_EQ(request.algorithm(), want.algorithm);
      EXPECT_EQ(request.protocol(), want.protocol);
      EXPECT_EQ(request.segment_bytes(), want.segment);
      EXPECT_EQ(request.policy_version(), 1u);
    }
    // Both daemons explain the communicator's ops alike: with the root's policy.
    for (const Daemon* daemon : {&root, &other}) {
      const v1::ExplainPolicyResponse explained = Explain(*daemon, comm, want.bytes);
      EXPECT_EQ(explained.rule(), want.rule);
      EXPECT_EQ(explained.algorithm(), want.algorithm);
      EXPECT_EQ(explained.protocol(), want.protocol);
      EXPECT_EQ(explained.segment_bytes(), want.segment);
      EXPECT_EQ(explained.transport(), "tcp");
      EXPECT_EQ(explained.comm_label(), "training");
      EXPECT_EQ(explained.world_size(), 2u);
      EXPECT_TRUE(absl::StrContains(explained.source(), root.peer_address()))
          << explained.source();
    }
  }

  // Rooted at the other daemon, the same ranks follow its policy instead.
  std::vector<Rank> reversed = Join(other, root, "training");
  ASSERT_EQ(reversed.size(), 2u);
  for (const Request& request : Allreduce(reversed, 256)) {
    EXPECT_EQ(request.chosen_by(), "everything");
    EXPECT_EQ(request.algorithm(), "recursive_doubling");
    EXPECT_EQ(request.protocol(), "eager");
  }

  // A forced algorithm overrides the rule's; the rule still sets the protocol.
  absl::StatusOr<Request> forced[2];
  for (int i = 0; i < 2; ++i) {
    forced[i] = ranks[i].comm->AllreduceAsync(*ranks[i].send, *ranks[i].recv, 256,
                                              DataType::kFloat32, ReduceOp::kSum,
                                              {.algorithm = "ring"});
  }
  for (auto& request : forced) {
    ASSERT_TRUE(request.ok() && request->Wait().ok());
    EXPECT_EQ(request->algorithm(), "ring");
    EXPECT_EQ(request->chosen_by(), "small");
    EXPECT_EQ(request->protocol(), "rendezvous");
  }

  // Without a communicator, explain uses the daemon's policy and the fields given.
  const v1::ExplainPolicyResponse general = FromJson<v1::ExplainPolicyResponse>(
      Ccloctl(other, {"--json", "policy", "explain", "--op", "allreduce", "--bytes", "64K",
                      "--world-size", "16", "--transport", "local"}));
  EXPECT_EQ(general.rule(), "everything");
  EXPECT_EQ(general.rule_index(), 1u);
  EXPECT_EQ(general.source(), "this daemon");
  const v1::ExplainPolicyResponse builtin = FromJson<v1::ExplainPolicyResponse>(
      Ccloctl(other, {"--json", "policy", "explain", "--op", "bcast", "--bytes", "1M"}));
  EXPECT_EQ(builtin.rule(), "built-in");
  EXPECT_EQ(builtin.algorithm(), "one_to_all");

  // Bad explain requests fail with the reason.
  for (const auto& [args, reason] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"policy", "explain", "--op", "allreduc"}, "--op 'allreduc' is not one of send"},
           {{"policy", "explain", "--op", "allreduce", "--bytes", "1Q"}, "'1Q' is not a byte size"},
           {{"policy", "explain", "--op", "allreduce", "--comm", "zz"}, "zz"},
           {{"policy", "explain", "--op", "allreduce", "--comm", comm.substr(0, 8), "--tenant",
             "x"},
            "with a communicator, its own world size, transport, tenant and label apply"},
           {{"policy", "explain", "--op", "allreduce", "--transport", "ib"},
            "transport 'ib' is not one of local, tcp"},
           {{"policy", "explain", "--op", "allreduce", "--tenant", "nosuch"},
            "tenant 'nosuch' is not configured (tenants: default)"}}) {
    const ProcessResult result = Ccloctl(root, args);
    EXPECT_NE(result.exit_code, 0) << args[3];
    EXPECT_TRUE(absl::StrContains(result.output, reason)) << result.output;
  }
}

TEST(PolicyTest, SetReplacesThePolicyForNewCommunicatorsAndKeepsItOnBadFiles) {
  Daemon root(kRootPolicy);
  Daemon other;
  std::vector<Rank> before = Join(root, other, "");
  ASSERT_EQ(before.size(), 2u);
  const std::string dir = root.runtime_dir() + "/..";
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };

  // Every invalid file is refused with its reason; the policy stays at version 1.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"rules: [{collective: allreduce, algorithm: chain}]",
       "algorithm 'chain' cannot serve allreduce; valid: ring, recursive_doubling, reduce_bcast"},
      {"rules: [{collective: allgatherr, algorithm: ring}]", "'allgatherr' is not one of"},
      {"rules: [{collective: allreduce, bytes: {min: 8K, max: 4K}, algorithm: ring}]",
       "bytes range [8192, 4096] is empty"},
      {"rules: [{collective: allreduce, bytes: {max: 64K}, algorithm: ring},"
       " {collective: allreduce, bytes: {min: 1K, max: 1M}, algorithm: reduce_bcast}]",
       "overlap"},
      {"rules: [{collective: allreduce, tenant: nobody, algorithm: ring}]",
       "tenant 'nobody' is not configured (tenants: default)"},
      {"rules: [", "policy is not valid YAML"},
  };
  for (const auto& [text, reason] : bad) {
    const std::string file = write("bad.yaml", text);
    for (const char* verb : {"validate", "set"}) {
      const ProcessResult result = Ccloctl(root, {"policy", verb, file});
      EXPECT_EQ(result.exit_code, 1) << verb << " " << text;
      EXPECT_TRUE(absl::StrContains(result.output, reason)) << result.output;
    }
  }
  EXPECT_EQ(Version(root), 1u);
  const ProcessResult missing = Ccloctl(root, {"policy", "set", dir + "/none.yaml"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(missing.output, "cannot read policy file")) << missing.output;

  const std::string good =
      write("good.yaml", "rules: [{name: all-ring, collective: allreduce, algorithm: ring}]");
  const ProcessResult valid = Ccloctl(root, {"policy", "validate", good});
  EXPECT_EQ(valid.exit_code, 0) << valid.output;
  EXPECT_TRUE(absl::StrContains(valid.output, "valid, 1 rules")) << valid.output;
  EXPECT_EQ(Version(root), 1u);
  const ProcessResult set = Ccloctl(root, {"policy", "set", good});
  EXPECT_EQ(set.exit_code, 0) << set.output;
  EXPECT_TRUE(absl::StrContains(set.output, "policy version 2 in force, 1 rules")) << set.output;
  const ProcessResult shown = Ccloctl(root, {"policy", "get"});
  EXPECT_TRUE(absl::StrContains(shown.output, "# policy version 2, 1 rules\nrules:\n  - name: all-ring"))
      << shown.output;
  EXPECT_TRUE(absl::StrContains(Scrape(root), "cclod_policy_version 2"));

  // The communicator made before keeps its snapshot; a new one takes the new policy.
  for (const Request& request : Allreduce(before, 256)) {
    EXPECT_EQ(request.chosen_by(), "small");
    EXPECT_EQ(request.policy_version(), 1u);
  }
  std::vector<Rank> after = Join(root, other, "");
  ASSERT_EQ(after.size(), 2u);
  for (const Request& request : Allreduce(after, 256)) {
    EXPECT_EQ(request.chosen_by(), "all-ring");
    EXPECT_EQ(request.algorithm(), "ring");
    EXPECT_EQ(request.policy_version(), 2u);
  }
  // A label that is not one is refused when the id is made.
  absl::StatusOr<std::string> token = after[0].client->CreateCommunicatorId("no spaces");
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PolicyTest, SighupAppliesTheConfigsPolicyOrKeepsTheRunningOne) {
  Daemon daemon(kRootPolicy);
  auto reload = [&](const std::string& to, const std::string& outcome) {
    return ReloadPolicy(daemon, absl::StrReplaceAll(kRootPolicy, {{"bytes: {max: 4K}", to}}),
                        outcome);
  };
  ASSERT_TRUE(reload("bytes: {max: 8K}", "policy version 2 in force (2 rules)"))
      << daemon.process().Output();
  EXPECT_EQ(Version(daemon), 2u);
  EXPECT_TRUE(absl::StrContains(Ccloctl(daemon, {"policy", "get"}).output, "max: 8192"));
  ASSERT_TRUE(reload("bytes: {max: 8K}\n      transport: fast", "rejected, the running config stays"))
      << daemon.process().Output();
  EXPECT_TRUE(absl::StrContains(daemon.process().Output(),
                                "transport 'fast' is not one of local, tcp"));
  EXPECT_EQ(Version(daemon), 2u);
}

TEST(PolicyTest, ReloadsOnEitherDaemonLeaveEveryCommunicatorItsRootsSnapshot) {
  Daemon root(kRootPolicy);
  Daemon other(kOtherPolicy);
  std::vector<Rank> before = Join(root, other, "");
  ASSERT_EQ(before.size(), 2u);
  Rank maker;
  maker.client = *Client::Attach(root.runtime_dir());
  absl::StatusOr<std::string> token = maker.client->CreateCommunicatorId();
  ASSERT_TRUE(token.ok()) << token.status();

  // Rank 0's part of an allreduce is in flight while both daemons take other policies;
  // rank 1's part comes after them.
  for (size_t i = 0; i < before.size(); ++i) {
    float* data = static_cast<float*>(before[i].send->data());
    std::fill(data, data + 256, static_cast<float>(i + 1));
  }
  absl::StatusOr<Request> in_flight = before[0].comm->AllreduceAsync(
      *before[0].send, *before[0].recv, 256, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(in_flight.ok()) << in_flight.status();
  ASSERT_TRUE(ReloadPolicy(root,
                           absl::StrReplaceAll(kOtherPolicy, {{"recursive_doubling", "ring"}}),
                           "policy version 2 in force (1 rules)"))
      << root.process().Output();
  ASSERT_TRUE(ReloadPolicy(
      other, absl::StrReplaceAll(kOtherPolicy, {{"recursive_doubling", "reduce_bcast"}}),
      "policy version 2 in force (1 rules)"))
      << other.process().Output();
  absl::StatusOr<Request> after = before[1].comm->AllreduceAsync(
      *before[1].send, *before[1].recv, 256, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(after.ok()) << after.status();
  for (Request* request : {&*in_flight, &*after}) {
    const absl::Status done = request->Wait();
    ASSERT_TRUE(done.ok()) << done;
    EXPECT_EQ(request->chosen_by(), "small");
    EXPECT_EQ(request->algorithm(), "reduce_bcast");
    EXPECT_EQ(request->policy_version(), 1u);
  }
  for (const Rank& rank : before) {
    EXPECT_EQ(static_cast<const float*>(rank.recv->data())[255], 3.0f);
  }
  // Later ops of that communicator, and one whose id was made before the reloads, still
  // choose by the root's policy as it was.
  for (const Request& request : Allreduce(before, 1 << 18)) {
    EXPECT_EQ(request.chosen_by(), "built-in");
    EXPECT_EQ(request.policy_version(), 1u);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> second;
  std::thread joiner([&] { second = before[1].client->Join(*token, 1, 2); });
  absl::StatusOr<std::unique_ptr<Communicator>> first = maker.client->Join(*token, 0, 2);
  joiner.join();
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  std::vector<Rank> made_before(2);
  made_before[0].client = std::move(maker.client);
  made_before[0].comm = *std::move(first);
  made_before[1].comm = *std::move(second);
  made_before[0].send = *made_before[0].client->AllocBuffer(1 << 20);
  made_before[0].recv = *made_before[0].client->AllocBuffer(1 << 20);
  made_before[1].send = *before[1].client->AllocBuffer(1 << 20);
  made_before[1].recv = *before[1].client->AllocBuffer(1 << 20);
  for (const Request& request : Allreduce(made_before, 256)) {
    EXPECT_EQ(request.chosen_by(), "small");
    EXPECT_EQ(request.policy_version(), 1u);
  }
  // Communicators made after the reloads take their root's new policy, on both daemons.
  for (auto [made_at, algorithm] : {std::pair<Daemon*, const char*>{&root, "ring"},
                                    std::pair<Daemon*, const char*>{&other, "reduce_bcast"}}) {
    std::vector<Rank> ranks = Join(*made_at, made_at == &root ? other : root, "");
    ASSERT_EQ(ranks.size(), 2u);
    for (const Request& request : Allreduce(ranks, 256)) {
      EXPECT_EQ(request.chosen_by(), "everything");
      EXPECT_EQ(request.algorithm(), algorithm);
      EXPECT_EQ(request.policy_version(), 2u);
    }
  }
}

}  // namespace
}  // namespace cclo::testing
