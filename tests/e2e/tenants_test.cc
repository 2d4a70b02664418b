// Tenants across real processes: a client of another user names the first tenant's ids in
// every Client RPC and is refused without learning anything; unknown callers are refused
// or take the default tenant as configured; admin.sock is for the admin group; each quota
// is hit and reported.
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cclo/client.h"
#include "cclo/v1/admin.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "hw/process.h"
#include "tests/e2e/alone.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"
#include "tests/loopback/loopback.h"

namespace cclo::testing {
namespace {

constexpr uid_t kNobody = 65534;
constexpr uid_t kStranger = 65533;  // in no tenant and no passwd entry

/// Lets other users reach the daemon's sockets (the harness makes its dir 0700).
void OpenToOthers(const Daemon& daemon) {
  ASSERT_EQ(chmod((daemon.runtime_dir() + "/..").c_str(), 0755), 0);
}

/// Runs the intruder as `uid` and returns its "STEP CODE MESSAGE" lines by step.
std::map<std::string, std::pair<int, std::string>> Intruder(const std::vector<std::string>& args) {
  std::vector<std::string> command = {Runfile("tests/e2e/intruder")};
  command.insert(command.end(), args.begin(), args.end());
  ProcessResult result = Process(command).Wait(absl::Seconds(60));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  std::map<std::string, std::pair<int, std::string>> steps;
  std::istringstream lines(result.output);
  std::string step;
  int code;
  while (lines >> step >> code) {
    std::string message;
    std::getline(lines, message);
    steps[step] = {code, message.empty() ? "" : message.substr(1)};
  }
  return steps;
}

template <typename Response>
Response AdminJson(const Daemon& daemon, const std::string& command) {
  ProcessResult result = Ccloctl(daemon, {command, "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  Response response;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.output, &response).ok())
      << result.output;
  return response;
}

/// What `ccloctl tenants` says `tenant` uses of `quota`.
uint64_t Used(const Daemon& daemon, const std::string& tenant, const std::string& quota) {
  const v1::ListTenantsResponse tenants = AdminJson<v1::ListTenantsResponse>(daemon, "tenants");
  for (const v1::TenantInfo& info : tenants.tenants()) {
    if (info.name() != tenant) continue;
    for (const v1::QuotaUse& use : info.quotas()) {
      if (use.name() == quota) return use.used();
    }
  }
  ADD_FAILURE() << "no quota " << quota << " of tenant " << tenant;
  return ~0ull;
}

const char kTwoTenants[] = R"(default_tenant: ""
tenants:
  - name: alpha
    uids: [0]
  - name: beta
    uids: [65534]
)";

TEST(TenantsTest, AnotherTenantIsRefusedEveryIdOfTheFirstAndItsDataStays) {
  Daemon daemon(kTwoTenants);
  OpenToOthers(daemon);
  absl::StatusOr<std::unique_ptr<Client>> alpha = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(alpha.ok()) << alpha.status();
  absl::StatusOr<Buffer> buffer = (*alpha)->AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  float* values = reinterpret_cast<float*>(buffer->data());
  for (int i = 0; i < 16; ++i) values[i] = static_cast<float>(i) + 0.5f;
  absl::StatusOr<std::string> token = (*alpha)->CreateCommunicatorId();
  ASSERT_TRUE(token.ok());
  absl::StatusOr<std::unique_ptr<Communicator>> comm = (*alpha)->Join(*token, 0, 1);
  ASSERT_TRUE(comm.ok()) << comm.status();
  // An op whose result alpha has not collected yet.
  absl::StatusOr<Request> op =
      (*comm)->AllreduceAsync(*buffer, *buffer, 16, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(op.ok()) << op.status();

  auto steps =
      Intruder({daemon.runtime_dir(), absl::StrCat(kNobody), "intrude", absl::StrCat(buffer->id()),
                absl::StrCat((*comm)->handle()), absl::StrCat(op->op_id()), *token});
  const std::map<std::string, absl::StatusCode> expected = {
      {"join_own", absl::StatusCode::kOk},
      {"free_buffer", absl::StatusCode::kNotFound},
      {"submit_their_handle", absl::StatusCode::kNotFound},
      {"submit_their_buffer", absl::StatusCode::kNotFound},
      {"submit_their_recv_buffer", absl::StatusCode::kNotFound},
      {"submit_after_their_op", absl::StatusCode::kNotFound},
      {"ring_their_handle", absl::StatusCode::kNotFound},
      {"ring_their_buffer", absl::StatusCode::kNotFound},
      {"ring_their_recv_buffer", absl::StatusCode::kNotFound},
      {"ring_after_their_op", absl::StatusCode::kNotFound},
      {"wait_their_op", absl::StatusCode::kNotFound},
      {"cancel_their_op", absl::StatusCode::kNotFound},
      {"destroy_their_comm", absl::StatusCode::kNotFound},
      {"join_their_comm", absl::StatusCode::kPermissionDenied},
      {"forged_session", absl::StatusCode::kUnauthenticated},
      {"admin_status", absl::StatusCode::kUnavailable},
      {"run_own", absl::StatusCode::kOk},
      {"ring_own", absl::StatusCode::kOk},
  };
  // A ring command is refused exactly as the Submit RPC: same code, same words.
  for (const std::string target :
       {"their_handle", "their_buffer", "their_recv_buffer", "after_their_op"}) {
    EXPECT_EQ(steps["ring_" + target], steps["submit_" + target]) << target;
  }
  for (const auto& [step, code] : expected) {
    ASSERT_TRUE(steps.count(step)) << "intruder did not report " << step;
    EXPECT_EQ(steps[step].first, static_cast<int>(code)) << step << ": " << steps[step].second;
  }
  // NOT_FOUND answers speak of "this session" only, never of whose the id is.
  EXPECT_EQ(steps["free_buffer"].second,
            absl::StrCat("no buffer ", buffer->id(), " in this session"));
  EXPECT_EQ(steps["destroy_their_comm"].second,
            absl::StrCat("no communicator handle ", (*comm)->handle(), " in this session"));
  EXPECT_TRUE(absl::StrContains(steps["join_their_comm"].second, "is not open to tenant 'beta'"))
      << steps["join_their_comm"].second;

  // Alpha's op, buffer and communicator are as they were.
  ASSERT_TRUE(op->Wait().ok());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(values[i], static_cast<float>(i) + 0.5f) << i;
  EXPECT_TRUE((*comm)->Allreduce(*buffer, *buffer, 16, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(Used(daemon, "alpha", "buffer_bytes"), 4096u);
  EXPECT_EQ(Used(daemon, "alpha", "communicators"), 1u);
  // Beta's session ended with the intruder and gave back everything it held.
  EXPECT_TRUE(WaitUntil([&] { return Used(daemon, "beta", "sessions") == 0; }, absl::Seconds(10)));
  EXPECT_EQ(Used(daemon, "beta", "buffer_bytes"), 0u);
  EXPECT_EQ(Used(daemon, "beta", "communicators"), 0u);
  EXPECT_EQ(Used(daemon, "beta", "inflight_ops"), 0u);
  EXPECT_TRUE((*alpha)->FreeBuffer(*std::move(buffer)).ok());
}

/// Alpha's clients of two daemons and a token of alpha's rooted at the first.
struct Alpha {
  std::unique_ptr<Client> first;
  std::unique_ptr<Client> second;
  std::string token;
};

/// Opens `root` and `other` to other users and attaches `alpha`'s clients to them.
void AttachAlpha(const Daemon& root, const Daemon& other, Alpha* alpha) {
  OpenToOthers(root);
  OpenToOthers(other);
  absl::StatusOr<std::unique_ptr<Client>> first = Client::Attach(root.runtime_dir());
  absl::StatusOr<std::unique_ptr<Client>> second = Client::Attach(other.runtime_dir());
  ASSERT_TRUE(first.ok() && second.ok());
  absl::StatusOr<std::string> token = (*first)->CreateCommunicatorId();
  ASSERT_TRUE(token.ok()) << token.status();
  *alpha = {*std::move(first), *std::move(second), *std::move(token)};
}

/// Alpha's ranks 0 and 1, on its first and second daemon, sum 3 and 4 to 7 in an allreduce.
void ExpectAlphaReduces(const Alpha& alpha, Communicator& rank0, Communicator& rank1) {
  absl::StatusOr<Buffer> buffer0 = alpha.first->AllocBuffer(64);
  absl::StatusOr<Buffer> buffer1 = alpha.second->AllocBuffer(64);
  ASSERT_TRUE(buffer0.ok() && buffer1.ok());
  reinterpret_cast<int32_t*>(buffer0->data())[0] = 3;
  reinterpret_cast<int32_t*>(buffer1->data())[0] = 4;
  absl::StatusOr<Request> reduced0 =
      rank0.AllreduceAsync(*buffer0, *buffer0, 1, DataType::kInt32, ReduceOp::kSum);
  ASSERT_TRUE(reduced0.ok()) << reduced0.status();
  EXPECT_TRUE(rank1.Allreduce(*buffer1, *buffer1, 1, DataType::kInt32, ReduceOp::kSum).ok());
  EXPECT_TRUE(reduced0->Wait().ok());
  EXPECT_EQ(reinterpret_cast<int32_t*>(buffer0->data())[0], 7);
  EXPECT_EQ(reinterpret_cast<int32_t*>(buffer1->data())[0], 7);
}

TEST(TenantsTest, TheRootRefusesARankOfAnotherTenantWhereverItJoins) {
  // Beta learned alpha's token (cclo-run's argv shows it to every user): it joins before
  // alpha's first rank on the root daemon, and as alpha's missing rank on another daemon.
  Daemon root(kTwoTenants), other(kTwoTenants);
  Alpha alpha;
  ASSERT_NO_FATAL_FAILURE(AttachAlpha(root, other, &alpha));
  const std::string refusal = "is not open to tenant 'beta'";

  auto before_alpha =
      Intruder({root.runtime_dir(), absl::StrCat(kNobody), "join", alpha.token, "0", "2"})["join"];
  EXPECT_EQ(before_alpha.first, static_cast<int>(absl::StatusCode::kPermissionDenied))
      << before_alpha.second;
  EXPECT_TRUE(absl::StrContains(before_alpha.second, refusal)) << before_alpha.second;

  absl::StatusOr<std::unique_ptr<Communicator>> rank0;
  std::thread joining([&] { rank0 = alpha.first->Join(alpha.token, 0, 2); });
  auto elsewhere =
      Intruder({other.runtime_dir(), absl::StrCat(kNobody), "join", alpha.token, "1", "2"})["join"];
  EXPECT_EQ(elsewhere.first, static_cast<int>(absl::StatusCode::kPermissionDenied))
      << elsewhere.second;
  EXPECT_TRUE(absl::StrContains(elsewhere.second, refusal)) << elsewhere.second;

  // Alpha's own ranks still form the communicator, the two of them alone.
  absl::StatusOr<std::unique_ptr<Communicator>> rank1 = alpha.second->Join(alpha.token, 1, 2);
  joining.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ExpectAlphaReduces(alpha, **rank0, **rank1);
}

/// Beta's join of alpha's communicator and then alpha's rank 1, both on the other daemon,
/// waiting for the root daemon's answer.
struct JoinsBesideBeta {
  ~JoinsBesideBeta() {
    if (joining.joinable()) joining.join();
  }
  std::unique_ptr<Process> beta;
  absl::StatusOr<std::unique_ptr<Communicator>> rank1;
  std::thread joining;  ///< alpha's rank 1's, into `rank1`
};

/// Stops `root` (SIGSTOP) and starts the joins of `joins` on `other`, beta's with a timeout
/// of `beta_timeout_ms`; returns once both wait in the accept queue of the root's peer port.
void JoinBesideBeta(Daemon& root, const Daemon& other, const Alpha& alpha, JoinsBesideBeta* joins,
                    uint32_t beta_timeout_ms = kJoinTimeoutMs) {
  uint32_t peer_port = 0;
  ASSERT_TRUE(
      absl::SimpleAtoi(root.peer_address().substr(root.peer_address().rfind(':') + 1), &peer_port));
  auto waiting_at_root = [&](int64_t count) {
    return WaitUntil([&] { return UnreadAt(static_cast<uint16_t>(peer_port)) == count; },
                     absl::Seconds(10));
  };
  root.process().Signal(SIGSTOP);
  joins->beta = std::make_unique<Process>(std::vector<std::string>{
      Runfile("tests/e2e/intruder"), other.runtime_dir(), absl::StrCat(kNobody), "join",
      alpha.token, "1", "2", absl::StrCat(beta_timeout_ms)});
  EXPECT_TRUE(waiting_at_root(1));
  joins->joining =
      std::thread([&alpha, joins] { joins->rank1 = alpha.second->Join(alpha.token, 1, 2); });
  EXPECT_TRUE(waiting_at_root(2));
}

TEST(TenantsTest, ARankOfAnotherTenantWaitingForTheRootKeepsNoneOfTheOwnersOut) {
  // Beta joins alpha's communicator first on the daemon of alpha's rank 1. The root refuses
  // it, but until it answers (here held: the root daemon is stopped, and the joins wait in
  // its peer port's accept queue), alpha's rank 1 joins there too.
  Daemon root(kTwoTenants), other(kTwoTenants);
  Alpha alpha;
  ASSERT_NO_FATAL_FAILURE(AttachAlpha(root, other, &alpha));
  JoinsBesideBeta joins;
  ASSERT_NO_FATAL_FAILURE(JoinBesideBeta(root, other, alpha, &joins));
  root.process().Signal(SIGCONT);
  absl::StatusOr<std::unique_ptr<Communicator>> rank0 = alpha.first->Join(alpha.token, 0, 2);
  joins.joining.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(joins.rank1.ok()) << joins.rank1.status();
  const std::string refused = joins.beta->Wait(absl::Seconds(30)).output;
  // Refused by the root: for its tenant, or as late once alpha's ranks had all joined.
  EXPECT_TRUE(absl::StartsWith(refused, "join 7 ") || absl::StartsWith(refused, "join 5 "))
      << refused;

  // Beta's refused join took nothing of alpha's with it.
  ExpectAlphaReduces(alpha, **rank0, **joins.rank1);
  const v1::ListCommunicatorsResponse comms =
      AdminJson<v1::ListCommunicatorsResponse>(other, "comms");
  ASSERT_EQ(comms.communicators_size(), 1);
  EXPECT_EQ(comms.communicators(0).tenant(), "alpha");
  EXPECT_EQ(comms.communicators(0).state(), "ready");
  EXPECT_EQ(Used(other, "beta", "communicators"), 0u);
}

TEST(TenantsTest, AnOperatorsDestroyEndsTheOwnersJoinWaitingBesideAnotherTenants) {
  // As above, but the operator destroys the communicator on the other daemon while both
  // joins wait there (it lists beta's): alpha's join there ends with it too, and the root's
  // answer forms nothing there afterwards.
  Daemon root(kTwoTenants), other(kTwoTenants);
  Alpha alpha;
  ASSERT_NO_FATAL_FAILURE(AttachAlpha(root, other, &alpha));
  JoinsBesideBeta joins;
  ASSERT_NO_FATAL_FAILURE(JoinBesideBeta(root, other, alpha, &joins));
  const v1::ListCommunicatorsResponse comms =
      AdminJson<v1::ListCommunicatorsResponse>(other, "comms");
  ASSERT_EQ(comms.communicators_size(), 1);
  ProcessResult destroyed = Ccloctl(other, {"comms", "destroy", comms.communicators(0).comm_id()});
  EXPECT_EQ(destroyed.exit_code, 0) << destroyed.output;
  root.process().Signal(SIGCONT);
  absl::StatusOr<std::unique_ptr<Communicator>> rank0 =
      alpha.first->Join(alpha.token, 0, 2, absl::Seconds(5));
  joins.joining.join();
  EXPECT_EQ(joins.rank1.status().code(), absl::StatusCode::kUnavailable) << joins.rank1.status();
  EXPECT_TRUE(absl::StrContains(joins.rank1.status().message(), "destroyed by the operator"))
      << joins.rank1.status();
  joins.beta->Wait(absl::Seconds(30));
  EXPECT_EQ(AdminJson<v1::ListCommunicatorsResponse>(other, "comms").communicators_size(), 0);
}

TEST(TenantsTest, TheOwnersJoinWaitingBesideAnotherTenantsIsListedOnceThatOneEnds) {
  // Beta's join, listed on the other daemon, gives up on the stopped root first: alpha's
  // rank 1 waiting beside it is listed in its place, and joins once the root answers.
  Daemon root(kTwoTenants), other(kTwoTenants);
  Alpha alpha;
  ASSERT_NO_FATAL_FAILURE(AttachAlpha(root, other, &alpha));
  JoinsBesideBeta joins;
  ASSERT_NO_FATAL_FAILURE(JoinBesideBeta(root, other, alpha, &joins, 1000));
  const std::string ended = joins.beta->Wait(absl::Seconds(30)).output;
  EXPECT_TRUE(absl::StartsWith(ended, "join 14 ")) << ended;  // UNAVAILABLE: no answer
  const v1::ListCommunicatorsResponse comms =
      AdminJson<v1::ListCommunicatorsResponse>(other, "comms");
  ASSERT_EQ(comms.communicators_size(), 1);
  EXPECT_EQ(comms.communicators(0).tenant(), "alpha");
  EXPECT_EQ(comms.communicators(0).state(), "joining");
  EXPECT_EQ(comms.communicators(0).local_ranks_size(), 1);
  root.process().Signal(SIGCONT);
  absl::StatusOr<std::unique_ptr<Communicator>> rank0 = alpha.first->Join(alpha.token, 0, 2);
  joins.joining.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(joins.rank1.ok()) << joins.rank1.status();
  ExpectAlphaReduces(alpha, **rank0, **joins.rank1);
}

TEST(TenantsTest, UnknownCallerIsRefusedWithoutADefaultTenant) {
  Daemon daemon(kTwoTenants);
  OpenToOthers(daemon);
  auto steps = Intruder({daemon.runtime_dir(), absl::StrCat(kStranger), "attach"});
  ASSERT_TRUE(steps.count("attach"));
  EXPECT_EQ(steps["attach"].first, static_cast<int>(absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(steps["attach"].second,
            "cclod refused the attach: uid 65533 belongs to no tenant of this daemon, and it "
            "refuses unknown callers");
  EXPECT_TRUE(daemon.process().WaitForOutput("attach from pid", absl::Seconds(10)));
  EXPECT_TRUE(absl::StrContains(daemon.process().Output(), "uid 65533 refused: uid 65533"));
}

TEST(TenantsTest, UnknownCallerTakesTheDefaultTenant) {
  Daemon daemon("tenants:\n  - name: alpha\n    uids: [0]\n  - name: default\n");
  OpenToOthers(daemon);
  Process stranger(
      {Runfile("tests/e2e/intruder"), daemon.runtime_dir(), absl::StrCat(kStranger), "attach"});
  ASSERT_TRUE(stranger.WaitForOutput("attach 0 ", absl::Seconds(30))) << stranger.Output();
  v1::ListSessionsResponse sessions = AdminJson<v1::ListSessionsResponse>(daemon, "sessions");
  ASSERT_EQ(sessions.sessions_size(), 1);
  EXPECT_EQ(sessions.sessions(0).uid(), kStranger);
  EXPECT_EQ(sessions.sessions(0).tenant(), "default");
  EXPECT_EQ(sessions.sessions(0).pid(), static_cast<uint32_t>(stranger.pid()));
  ProcessResult table = Ccloctl(daemon, {"sessions"});
  EXPECT_TRUE(absl::StrContains(table.output, "default")) << table.output;
}

TEST(TenantsTest, FullInflightQuotaGivesTheRetryHintAsTrailingMetadata) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 0}\n");
  RawSession session(daemon.runtime_dir());
  const uint64_t buffer = session.Alloc(4096);
  uint64_t handle = 0;
  ASSERT_TRUE(session.Join(session.NewToken(), 0, 1, &handle).ok());
  std::unique_ptr<grpc::ClientContext> context = session.Context();
  cclo::v1::SubmitResponse response;
  grpc::Status refused =
      session.stub().Submit(context.get(), AllreduceRequest(handle, buffer, 16), &response);
  ASSERT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  const auto& trailers = context->GetServerTrailingMetadata();
  auto hint = trailers.find("cclo-retry-after-ms");
  ASSERT_NE(hint, trailers.end());
  const std::string retry_ms(hint->second.data(), hint->second.size());
  int64_t parsed = 0;
  ASSERT_TRUE(absl::SimpleAtoi(retry_ms, &parsed)) << retry_ms;
  EXPECT_GE(parsed, 1);
  EXPECT_EQ(refused.error_message(),
            absl::StrCat("tenant 'default' quota inflight_ops: limit 0, in use 0, asked for 1; "
                         "retry after ",
                         retry_ms, " ms"));
  // The command ring goes through the same quota check and says the same.
  grpc::Status ring_refused = session.RunOnRing(AllreduceRequest(handle, buffer, 16));
  EXPECT_EQ(ring_refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ring_refused.error_message(), refused.error_message());
  // Waiting for room on the ring gives up at the op's deadline with the quota's answer.
  cclo::v1::SubmitRequest waiting = AllreduceRequest(handle, buffer, 16);
  waiting.set_wait_for_room(true);
  waiting.set_timeout_ms(100);
  grpc::Status gave_up = session.RunOnRing(waiting);
  EXPECT_EQ(gave_up.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StartsWith(gave_up.error_message(),
                               "tenant 'default' quota inflight_ops: limit 0, in use 0"))
      << gave_up.error_message();
}

// While one of a session's ring commands waits for room, the session's later commands
// are still taken: one that does not wait is refused at once (it may not overtake, and
// the quota has no room), one that waits parks behind, each until its own deadline, and
// one that could never run is refused at once with its own error.
TEST(TenantsTest, CommandsBehindOneWaitingForRoomAreAnsweredInOrder) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 0}\n");
  RawSession session(daemon.runtime_dir());
  const uint64_t buffer = session.Alloc(4096);
  uint64_t handle = 0;
  ASSERT_TRUE(session.Join(session.NewToken(), 0, 1, &handle).ok());
  auto command = [&](uint64_t cookie, bool wait, uint32_t timeout_ms, uint64_t count = 16) {
    cclo::v1::SubmitRequest request = AllreduceRequest(handle, buffer, count);
    request.set_wait_for_room(wait);
    request.set_timeout_ms(timeout_ms);
    ring::CommandSlot slot;
    EXPECT_TRUE(ring::EncodeCommand(request, cookie, slot).ok());
    return slot;
  };
  // 1 waits 3 s for room, 2 does not wait, 3 waits 1 s behind 1, 4 would wait 2 s but
  // names more than its buffer holds: all in one pass.
  session.PostAll({command(1, true, 3000), command(2, false, 3000), command(3, true, 1000),
                   command(4, true, 2000, 2048)});
  std::vector<uint64_t> order;
  for (int i = 0; i < 4; ++i) {
    const ring::CompletionSlot answer = session.NextCompletion();
    order.push_back(answer.cookie);
    EXPECT_EQ(answer.kind, static_cast<uint32_t>(ring::CompletionKind::kRejected));
    const std::string message = ring::GetText(answer.message, ring::kMessageBytes);
    if (answer.cookie == 4) {
      // Its own error, at once: not the quota's when its deadline comes.
      EXPECT_EQ(answer.code, static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
      EXPECT_EQ(message,
                absl::StrCat("send range [0, +8192) is outside buffer ", buffer, " of 4096 bytes"));
      continue;
    }
    EXPECT_EQ(answer.code, static_cast<int32_t>(absl::StatusCode::kResourceExhausted));
    if (answer.cookie == 2) {
      EXPECT_EQ(message,
                "tenant 'default' quota inflight_ops: 1 op of this session waits for room "
                "ahead of this one (which does not wait: wait_for_room)");
    } else {
      EXPECT_TRUE(absl::StartsWith(message, "tenant 'default' quota inflight_ops: limit 0"))
          << message;
    }
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 4, 3, 1}));
}

// A command waiting for room may name an op whose result the client consumes meanwhile:
// the daemon keeps that result until the command is submitted (ring.h's contract).
TEST(TenantsTest, AWaitingCommandFindsTheOpItNamesWhenRoomComes) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 1}\n");
  RawSession session(daemon.runtime_dir());
  RawSession other(daemon.runtime_dir());
  const uint64_t buffer = session.Alloc(4096);
  uint64_t alone = 0;
  ASSERT_TRUE(session.Join(session.NewToken(), 0, 1, &alone).ok());
  // A pair whose rank 1 never joins the barrier below: it holds the quota until its deadline.
  const std::string token = session.NewToken();
  uint64_t pair = 0;
  std::thread joiner([&] { EXPECT_TRUE(other.Join(token, 1, 2).ok()); });
  ASSERT_TRUE(session.Join(token, 0, 2, &pair).ok());
  joiner.join();
  auto slot = [](const cclo::v1::SubmitRequest& request, uint64_t cookie) {
    ring::CommandSlot command;
    EXPECT_TRUE(ring::EncodeCommand(request, cookie, command).ok());
    return command;
  };
  session.Post(slot(AllreduceRequest(alone, buffer, 16), 1));
  session.AwaitPosted(2);  // ACCEPTED and FINISHED of op 1; only the first is consumed now
  const ring::CompletionSlot accepted = session.NextCompletion();
  ASSERT_EQ(accepted.kind, static_cast<uint32_t>(ring::CompletionKind::kAccepted));
  const uint64_t first = accepted.op_id;
  cclo::v1::SubmitRequest barrier;
  barrier.set_comm_handle(pair);
  barrier.set_collective(cclo::v1::BARRIER);
  barrier.set_timeout_ms(2000);
  session.Post(slot(barrier, 2));
  cclo::v1::SubmitRequest waiting = AllreduceRequest(alone, buffer, 16);
  waiting.set_wait_for_room(true);
  waiting.set_timeout_ms(20'000);
  waiting.add_after(first);
  session.Post(slot(waiting, 3));
  session.AwaitDaemonSleeping();  // command 3 is parked
  const ring::CompletionSlot finished = session.NextCompletion();
  EXPECT_EQ(finished.cookie, 1u);
  EXPECT_EQ(finished.kind, static_cast<uint32_t>(ring::CompletionKind::kFinished));
  session.PublishCommandHead(3);  // the daemon sees op 1's result consumed
  // Command 3's answers (ACCEPTED and FINISHED come in either order), or its refusal.
  constexpr auto kRejected = static_cast<uint32_t>(ring::CompletionKind::kRejected);
  std::map<uint32_t, ring::CompletionSlot> answers;  // by kind
  while (answers.size() < 2 && !answers.contains(kRejected)) {
    const ring::CompletionSlot next = session.NextCompletion();
    if (next.cookie == 3) answers[next.kind] = next;
  }
  ASSERT_FALSE(answers.contains(kRejected))
      << ring::GetText(answers[kRejected].message, ring::kMessageBytes);
  const ring::CompletionSlot& result =
      answers[static_cast<uint32_t>(ring::CompletionKind::kFinished)];
  EXPECT_EQ(result.code, 0) << ring::GetText(result.message, ring::kMessageBytes);
}

TEST(TenantsTest, AdminSocketIsForTheAdminGroupOnly) {
  Daemon daemon("admin_group: nogroup\n");
  struct stat socket_stat {};
  ASSERT_EQ(stat((daemon.runtime_dir() + "/admin.sock").c_str(), &socket_stat), 0);
  const group* nogroup = getgrnam("nogroup");
  ASSERT_NE(nogroup, nullptr);
  EXPECT_EQ(socket_stat.st_gid, nogroup->gr_gid);
  EXPECT_EQ(socket_stat.st_mode & 0777, 0660u);

  ProcessResult result = RunCclod("admin_group: no-such-group\n");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output,
                                "cclod cannot start: config key 'admin_group': no group named "
                                "'no-such-group'"))
      << result.output;
}

// Started with a umask of 0, cclod makes its files with its own (0077), so that no socket
// is open to all between its bind and its chmod, and then gives each the mode it means.
TEST(TenantsTest, SocketsAreNeverWiderThanMeantWhateverTheUmask) {
  const mode_t caller = umask(0);
  Daemon daemon;
  umask(caller);
  std::ifstream status(absl::StrCat("/proc/", daemon.process().pid(), "/status"));
  std::string line;
  while (std::getline(status, line) && !absl::StartsWith(line, "Umask:")) {
  }
  EXPECT_EQ(line, "Umask:\t0077");
  for (const auto& [name, mode] : {std::pair{"client.sock", 0666u}, {"admin.sock", 0660u}}) {
    struct stat socket_stat {};
    ASSERT_EQ(stat((daemon.runtime_dir() + "/" + name).c_str(), &socket_stat), 0) << name;
    EXPECT_EQ(socket_stat.st_mode & 0777, mode) << name;
  }
}

TEST(TenantsTest, EachQuotaIsEnforcedAndReported) {
  Daemon daemon(R"(tenants:
  - name: default
    quotas: {buffer_bytes: 8192, communicators: 4, inflight_ops: 2, sessions: 2}
)");
  absl::StatusOr<std::unique_ptr<Client>> first = Client::Attach(daemon.runtime_dir());
  absl::StatusOr<std::unique_ptr<Client>> second = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  absl::StatusOr<std::unique_ptr<Client>> third = Client::Attach(daemon.runtime_dir());
  ASSERT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_EQ(third.status().message(),
            "cclod refused the attach: tenant 'default' quota sessions: limit 2, in use 2, asked "
            "for 1");

  absl::StatusOr<Buffer> one = (*first)->AllocBuffer(4096);
  absl::StatusOr<Buffer> two = (*second)->AllocBuffer(4096);
  ASSERT_TRUE(one.ok() && two.ok()) << one.status() << two.status();
  absl::StatusOr<Buffer> over = (*first)->AllocBuffer(1);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_TRUE(absl::StrContains(over.status().message(),
                                "tenant 'default' quota buffer_bytes: limit 8192, in use 8192, "
                                "asked for 1"))
      << over.status();

  // Two 2-rank communicators between the two sessions hold all four handles.
  std::vector<std::unique_ptr<Communicator>> ours, theirs;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::string> token = (*first)->CreateCommunicatorId();
    ASSERT_TRUE(token.ok());
    absl::StatusOr<std::unique_ptr<Communicator>> rank1;
    std::thread joiner([&] { rank1 = (*second)->Join(*token, 1, 2); });
    absl::StatusOr<std::unique_ptr<Communicator>> rank0 = (*first)->Join(*token, 0, 2);
    joiner.join();
    ASSERT_TRUE(rank0.ok() && rank1.ok()) << rank0.status() << rank1.status();
    ours.push_back(*std::move(rank0));
    theirs.push_back(*std::move(rank1));
  }
  absl::StatusOr<std::string> token = (*first)->CreateCommunicatorId();
  ASSERT_TRUE(token.ok());
  absl::StatusOr<std::unique_ptr<Communicator>> fifth = (*first)->Join(*token, 0, 1);
  ASSERT_EQ(fifth.status().code(), absl::StatusCode::kResourceExhausted) << fifth.status();
  EXPECT_TRUE(absl::StrContains(fifth.status().message(),
                                "tenant 'default' quota communicators: limit 4, in use 4"))
      << fifth.status();

  // Two receives in flight fill the in-flight quota; the second ends at its deadline.
  absl::StatusOr<Request> matched = ours[0]->RecvAsync(*one, 0, 8, DataType::kInt32, 1, 7);
  absl::StatusOr<Request> expiring =
      ours[1]->RecvAsync(*one, 64, 8, DataType::kInt32, 1, 9, {.timeout = absl::Seconds(5)});
  ASSERT_TRUE(matched.ok() && expiring.ok()) << matched.status() << expiring.status();
  absl::Status refused = theirs[0]->Send(*two, 0, 8, DataType::kInt32, 0, 7);
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(
      absl::StrContains(refused.message(),
                        "tenant 'default' quota inflight_ops: limit 2, in use 2, asked for 1; "
                        "retry after "))
      << refused;
  // Waiting for room gives up at the op's own deadline...
  absl::Status waited =
      theirs[0]->Send(*two, 0, 8, DataType::kInt32, 0, 7,
                      {.timeout = absl::Milliseconds(200), .wait_for_room = true});
  EXPECT_EQ(waited.code(), absl::StatusCode::kResourceExhausted) << waited;
  v1::ListTenantsResponse tenants = AdminJson<v1::ListTenantsResponse>(daemon, "tenants");
  ASSERT_EQ(tenants.tenants_size(), 1);
  EXPECT_EQ(tenants.tenants(0).refusals(), 5u);
  EXPECT_EQ(tenants.tenants(0).ops_running() + tenants.tenants(0).ops_queued(), 2u);
  EXPECT_EQ(Used(daemon, "default", "inflight_ops"), 2u);
  EXPECT_EQ(Used(daemon, "default", "sessions"), 2u);
  EXPECT_EQ(Used(daemon, "default", "buffer_bytes"), 8192u);
  const std::string metrics = Scrape(daemon);
  for (const char* line :
       {"cclod_admission_rejections_total{tenant=\"default\",quota=\"inflight_ops\"} 2",
        "cclod_admission_rejections_total{tenant=\"default\",quota=\"sessions\"} 1",
        "cclod_tenant_quota_used{tenant=\"default\",quota=\"buffer_bytes\"} 8192",
        "cclod_tenant_quota_limit{tenant=\"default\",quota=\"communicators\"} 4",
        "cclod_tenant_weight{tenant=\"default\"} 1"}) {
    EXPECT_TRUE(absl::StrContains(metrics, line)) << line << " not in:\n" << metrics;
  }
  // ... or gets it when an op ends.
  EXPECT_TRUE(theirs[0]
                  ->Send(*two, 0, 8, DataType::kInt32, 0, 7,
                         {.timeout = absl::Seconds(30), .wait_for_room = true})
                  .ok());
  EXPECT_TRUE(matched->Wait().ok());
  EXPECT_EQ(expiring->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(
      WaitUntil([&] { return Used(daemon, "default", "inflight_ops") == 0; }, absl::Seconds(10)));
  ProcessResult table = Ccloctl(daemon, {"tenants"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(table.output, "8192/8192")) << table.output;
}

// Ranks of one daemon count as one more peer daemon of their communicator: at most
// credits_per_peer of their messages to each other are staged at once. Beta sends 16 small
// messages between its two ranks here that it never receives, as many as the rx pool has
// buffers; the pool keeps the rest for alpha, whose small send between its own two ranks
// still completes before its receive is posted.
TEST(TenantsTest, ATenantSendingAmongItsOwnRanksHoldsAtMostItsCreditsOfTheRxPool) {
  Daemon daemon(std::string(kTwoTenants) +
                "rx_pool_bytes: 65536\nsegment_bytes: 65536\neager_max_bytes: 4096\n"
                "credits_per_peer: 4\n");
  OpenToOthers(daemon);
  Process hog(
      {Runfile("tests/e2e/intruder"), daemon.runtime_dir(), absl::StrCat(kNobody), "hog", "16"});
  ASSERT_TRUE(hog.WaitForOutput("hog ", absl::Seconds(60))) << hog.Output();
  ASSERT_TRUE(absl::StrContains(hog.Output(), "hog 0 ")) << hog.Output();
  v1::StatusResponse status = AdminJson<v1::StatusResponse>(daemon, "status");
  EXPECT_EQ(status.rx_pool_bytes_total(), 65536u);
  EXPECT_EQ(status.rx_pool_bytes_used(), 4 * 4096u);

  absl::StatusOr<std::unique_ptr<Client>> alpha = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(alpha.ok()) << alpha.status();
  absl::StatusOr<Buffer> buffer = (*alpha)->AllocBuffer(4096);
  absl::StatusOr<std::string> token = (*alpha)->CreateCommunicatorId();
  ASSERT_TRUE(buffer.ok() && token.ok()) << buffer.status() << token.status();
  absl::StatusOr<std::unique_ptr<Communicator>> rank1;
  std::thread joiner([&] { rank1 = (*alpha)->Join(*token, 1, 2); });
  absl::StatusOr<std::unique_ptr<Communicator>> rank0 = (*alpha)->Join(*token, 0, 2);
  joiner.join();
  ASSERT_TRUE(rank0.ok() && rank1.ok()) << rank0.status() << rank1.status();
  int32_t* values = reinterpret_cast<int32_t*>(buffer->data());
  values[0] = 42;
  absl::Status sent = (*rank0)->Send(*buffer, 0, 1, DataType::kInt32, 1, 7);
  EXPECT_TRUE(sent.ok()) << sent;
  EXPECT_EQ(AdminJson<v1::StatusResponse>(daemon, "status").rx_pool_bytes_used(), 5 * 4096u);
  EXPECT_TRUE((*rank1)->Recv(*buffer, 64, 1, DataType::kInt32, 0, 7).ok());
  EXPECT_EQ(values[16], 42);
  status = AdminJson<v1::StatusResponse>(daemon, "status");
  EXPECT_EQ(status.rx_pool_bytes_used(), 4 * 4096u);
  // The most it held at once, which the daemon's memory keeps.
  EXPECT_EQ(status.rx_pool_bytes_peak(), 5 * 4096u);
  EXPECT_TRUE(absl::StrContains(Scrape(daemon), "cclod_rx_pool_peak_bytes 20480\n"));
}

// A token refused at CreateCommunicatorId for the communicators quota (the tokens made here
// that not all ranks joined fill it) counts as a refusal of that quota, as one refused at
// JoinCommunicator does.
TEST(TenantsTest, ATokenRefusedForTheCommunicatorsQuotaIsCounted) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {communicators: 1}\n");
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->CreateCommunicatorId().ok());
  absl::StatusOr<std::string> refused = (*client)->CreateCommunicatorId();
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "tenant 'default' already has 1 communicators rooted here"))
      << refused.status();
  v1::ListTenantsResponse tenants = AdminJson<v1::ListTenantsResponse>(daemon, "tenants");
  ASSERT_EQ(tenants.tenants_size(), 1);
  EXPECT_EQ(tenants.tenants(0).refusals(), 1u);
  const std::string metrics = Scrape(daemon);
  const char* line =
      "cclod_admission_rejections_total{tenant=\"default\",quota=\"communicators\"} 1";
  EXPECT_TRUE(absl::StrContains(metrics, line)) << line << " not in:\n" << metrics;
}

// The buffers quota counts buffers, whatever their size; the daemon keeps no file
// descriptor per buffer, so many small buffers cannot use up its descriptors.
TEST(TenantsTest, TheBuffersQuotaCountsBuffersAndTheDaemonKeepsNoFdForThem) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {buffers: 40}\n");
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::StatusOr<uint64_t> fds_before = hw::OpenDescriptors(daemon.process().pid());
  ASSERT_TRUE(fds_before.ok()) << fds_before.status();
  std::vector<Buffer> buffers;
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<Buffer> buffer = (*client)->AllocBuffer(1);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffers.push_back(*std::move(buffer));
  }
  const absl::StatusOr<uint64_t> fds_after = hw::OpenDescriptors(daemon.process().pid());
  ASSERT_TRUE(fds_after.ok()) << fds_after.status();
  EXPECT_LT(*fds_after, *fds_before + 40);
  absl::StatusOr<Buffer> over = (*client)->AllocBuffer(1);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_TRUE(absl::StrContains(over.status().message(),
                                "tenant 'default' quota buffers: limit 40, in use 40, asked for 1"))
      << over.status();
  EXPECT_EQ(Used(daemon, "default", "buffer_bytes"), 40u);
  ASSERT_TRUE((*client)->FreeBuffer(std::move(buffers.back())).ok());
  EXPECT_TRUE((*client)->AllocBuffer(1).ok());
}

// A buffer freed while an op still uses it stays on the tenant's buffer quota until the
// op ends: the daemon holds its memory until then, and `ccloctl buffers` lists it as freed.
TEST(TenantsTest, AFreedBufferStaysChargedWhileAnOpUsesIt) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {buffer_bytes: 8192}\n");
  std::unique_ptr<Client> client;
  std::unique_ptr<Communicator> comm;
  ASSERT_NO_FATAL_FAILURE(AttachAlone(daemon, &client, &comm));
  absl::StatusOr<Buffer> buffer = client->AllocBuffer(8192);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  // A receive from the rank itself waits until its deadline: nothing is sent.
  absl::StatusOr<Request> receive =
      comm->RecvAsync(*buffer, 0, 8, DataType::kInt32, 0, 7, {.timeout = absl::Seconds(3)});
  ASSERT_TRUE(receive.ok()) << receive.status();
  const uint64_t freed_id = buffer->id();
  ASSERT_TRUE(client->FreeBuffer(*std::move(buffer)).ok());
  v1::ListBuffersResponse listed = AdminJson<v1::ListBuffersResponse>(daemon, "buffers");
  ASSERT_EQ(listed.buffers_size(), 1);
  EXPECT_EQ(listed.buffers(0).buffer_id(), freed_id);
  EXPECT_EQ(listed.buffers(0).bytes(), 8192u);
  EXPECT_TRUE(listed.buffers(0).freed());
  EXPECT_TRUE(absl::StrContains(Ccloctl(daemon, {"buffers"}).output, "freed, held by an op"));
  const v1::StatusResponse status = AdminJson<v1::StatusResponse>(daemon, "status");
  EXPECT_EQ(status.buffers(), 1u);
  EXPECT_EQ(status.buffer_bytes(), 8192u);
  absl::StatusOr<Buffer> over = client->AllocBuffer(4096);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_TRUE(absl::StrContains(over.status().message(),
                                "quota buffer_bytes: limit 8192, in use 8192, asked for 4096"))
      << over.status();
  EXPECT_EQ(Used(daemon, "default", "buffer_bytes"), 8192u);
  // Once the receive ends, its memory and its charge go.
  EXPECT_EQ(receive->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(
      WaitUntil([&] { return Used(daemon, "default", "buffer_bytes") == 0; }, absl::Seconds(10)));
  EXPECT_EQ(AdminJson<v1::ListBuffersResponse>(daemon, "buffers").buffers_size(), 0);
  EXPECT_TRUE(client->AllocBuffer(8192).ok());
}

/// Joins two clients of `daemon` as the ranks of a new 2-rank communicator.
void JoinPair(const Daemon& daemon, std::unique_ptr<Client> clients[2],
              std::unique_ptr<Communicator> comms[2]) {
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<std::unique_ptr<Client>> attached = Client::Attach(daemon.runtime_dir());
    ASSERT_TRUE(attached.ok()) << attached.status();
    clients[rank] = *std::move(attached);
  }
  absl::StatusOr<std::string> token = clients[0]->CreateCommunicatorId();
  ASSERT_TRUE(token.ok()) << token.status();
  absl::StatusOr<std::unique_ptr<Communicator>> second;
  std::thread joiner([&] { second = clients[1]->Join(*token, 1, 2); });
  absl::StatusOr<std::unique_ptr<Communicator>> first = clients[0]->Join(*token, 0, 2);
  joiner.join();
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  comms[0] = *std::move(first);
  comms[1] = *std::move(second);
}

// The engine holds a tenant's running calls to its scratch_bytes quota: an in-place
// recursive doubling allreduce needs its buffer's size in scratch on each rank, so at
// 2 MiB both ranks are refused under a 1 MiB quota, naming it, and at 256 KiB they run;
// the quota and its refusals are reported, and a reload raises it for the next calls.
TEST(TenantsTest, TheScratchQuotaRefusesCallsThatWouldHoldMore) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {scratch_bytes: 1048576}\n");
  std::unique_ptr<Client> clients[2];
  std::unique_ptr<Communicator> comms[2];
  ASSERT_NO_FATAL_FAILURE(JoinPair(daemon, clients, comms));
  constexpr uint64_t kCount = (2u << 20) / sizeof(float);
  Buffer buffers[2];
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<Buffer> buffer = clients[rank]->AllocBuffer(kCount * sizeof(float));
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    buffers[rank] = *std::move(buffer);
  }
  // Every rank runs an in-place allreduce of the first `count` floats: rank r holds r + 1.
  auto allreduce = [&](uint64_t count) {
    std::vector<absl::StatusOr<Request>> requests;
    for (int rank = 0; rank < 2; ++rank) {
      std::span<float> data = buffers[rank].span<float>();
      std::fill(data.begin(), data.begin() + count, static_cast<float>(rank + 1));
      requests.push_back(comms[rank]->AllreduceAsync(
          buffers[rank], buffers[rank], count, DataType::kFloat32, ReduceOp::kSum,
          {.algorithm = "recursive_doubling", .timeout = absl::Seconds(20), .in_place = true}));
    }
    std::vector<absl::Status> results;
    for (absl::StatusOr<Request>& request : requests) {
      results.push_back(request.ok() ? request->Wait() : request.status());
    }
    return results;
  };
  for (const absl::Status& refused : allreduce(kCount)) {
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(),
                                  "recursive_doubling needs 2097152 bytes of scratch here, but "
                                  "this tenant's scratch in use would exceed its scratch_bytes "
                                  "quota = 1048576"))
        << refused;
  }
  for (const absl::Status& ran : allreduce(kCount / 8)) EXPECT_TRUE(ran.ok()) << ran;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(buffers[rank].span<float>()[0], 3.0f);
    EXPECT_EQ(buffers[rank].span<float>()[kCount / 8 - 1], 3.0f);
  }
  EXPECT_TRUE(
      WaitUntil([&] { return Used(daemon, "default", "scratch_bytes") == 0; }, absl::Seconds(10)));
  const std::string metrics = Scrape(daemon);
  for (const char* line :
       {"cclod_tenant_quota_limit{tenant=\"default\",quota=\"scratch_bytes\"} 1048576",
        "cclod_admission_rejections_total{tenant=\"default\",quota=\"scratch_bytes\"} 2"}) {
    EXPECT_TRUE(absl::StrContains(metrics, line)) << line << " not in:\n" << metrics;
  }

  const std::string path = daemon.runtime_dir() + "/../cclod.yaml";
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::ofstream(path) << absl::StrReplaceAll(text.str(), {{"1048576", "4194304"}});
  daemon.process().Signal(SIGHUP);
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(daemon.process().Output(), "reloaded "); },
                        absl::Seconds(10)))
      << daemon.process().Output();
  for (const absl::Status& ran : allreduce(kCount)) EXPECT_TRUE(ran.ok()) << ran;
  EXPECT_EQ(buffers[0].span<float>()[kCount - 1], 3.0f);
}

// A buffer the client cannot map is given back to the daemon, and its quota with it.
TEST(TenantsTest, ABufferTheClientCannotMapIsGivenBack) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {buffer_bytes: 1073741824}\n");
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(daemon.runtime_dir());
  ASSERT_TRUE(client.ok()) << client.status();
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &before), 0);
  const absl::StatusOr<hw::ProcessStat> stat = hw::ReadProcessStat(getpid());
  ASSERT_TRUE(stat.ok()) << stat.status();
  rlimit tight = before;
  tight.rlim_cur = stat->virtual_bytes + (256ull << 20);  // room for the RPC, not for 1 GiB
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  absl::StatusOr<Buffer> unmapped = (*client)->AllocBuffer(1ull << 30);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &before), 0);
  ASSERT_FALSE(unmapped.ok());
  EXPECT_TRUE(absl::StrContains(unmapped.status().message(), "mmap")) << unmapped.status();
  EXPECT_TRUE(
      WaitUntil([&] { return Used(daemon, "default", "buffer_bytes") == 0; }, absl::Seconds(10)));
  EXPECT_TRUE((*client)->AllocBuffer(1ull << 30).ok());
}

/// A memory cgroup of its own for a daemon, under the test's own (cgroup v1) or the root
/// (v2); removed with the object, once the daemon in it is gone.
class MemoryCgroup {
 public:
  MemoryCgroup() {
    std::string own;
    std::ifstream cgroups("/proc/self/cgroup");
    for (std::string line; std::getline(cgroups, line);) {
      if (const size_t at = line.find(":memory:"); at != std::string::npos) {
        own = line.substr(at + 8);
      }
    }
    std::ifstream v2("/sys/fs/cgroup/cgroup.subtree_control");
    std::string controllers((std::istreambuf_iterator<char>(v2)), {});
    unified_ = absl::StrContains(controllers, "memory");
    dir_ = unified_ ? absl::StrCat("/sys/fs/cgroup/cclo-test-", getpid())
                    : absl::StrCat("/sys/fs/cgroup/memory", own, "/cclo-test-", getpid());
    if (mkdir(dir_.c_str(), 0755) != 0) dir_.clear();
  }
  ~MemoryCgroup() {
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  /// Empty if no memory cgroup could be made here.
  const std::string& dir() const { return dir_; }
  /// A Daemon launcher that moves cclod into the cgroup before it starts.
  std::vector<std::string> Launcher() const {
    return {"/bin/sh", "-c", absl::StrCat("echo $$ > ", dir_, "/cgroup.procs && exec \"$@\""),
            "sh"};
  }
  /// Limits the cgroup to what it uses now and `more` bytes; whether the limit took.
  bool LimitTo(uint64_t more) const {
    std::ifstream usage(dir_ + (unified_ ? "/memory.current" : "/memory.usage_in_bytes"));
    uint64_t used = 0;
    if (!(usage >> used)) return false;
    std::ofstream limit(dir_ + (unified_ ? "/memory.max" : "/memory.limit_in_bytes"));
    return static_cast<bool>(limit << used + more << std::flush);
  }

 private:
  bool unified_ = false;
  std::string dir_;
};

// A buffer's memory is charged to the memory cgroup of its client, not to the daemon's:
// a page of shared memory is charged to the process that touches it first, and the daemon
// would be that for a result's destination the client never wrote, so that a daemon under
// a memory limit (a unit's MemoryMax=) was killed by the kernel for what its tenants'
// buffers held.
TEST(TenantsTest, BuffersAreChargedToTheClientsMemoryNotTheDaemons) {
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "ThreadSanitizer's shadow of the buffers the daemon reads is the daemon's "
                  "own memory, several times theirs: the limit would kill it for that";
#endif
  MemoryCgroup cgroup;
  if (cgroup.dir().empty()) GTEST_SKIP() << "no memory cgroup can be made here";
  Daemon daemon("", cgroup.Launcher());
  std::unique_ptr<Client> client;
  std::unique_ptr<Communicator> comm;
  ASSERT_NO_FATAL_FAILURE(AttachAlone(daemon, &client, &comm));
  ASSERT_TRUE(cgroup.LimitTo(32 << 20));
  constexpr uint64_t kCount = 16 << 20;  // 64 MiB of float32 in each buffer
  absl::StatusOr<Buffer> send = client->AllocBuffer(kCount * sizeof(float));
  absl::StatusOr<Buffer> recv = client->AllocBuffer(kCount * sizeof(float));
  ASSERT_TRUE(send.ok()) << send.status();
  ASSERT_TRUE(recv.ok()) << recv.status();
  std::fill_n(send->span<float>().data(), kCount, 1.0f);
  absl::Status reduced = comm->Allreduce(*send, *recv, kCount, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(reduced.ok()) << reduced;
  EXPECT_EQ(recv->span<float>()[0], 1.0f);
  EXPECT_EQ(recv->span<float>()[kCount - 1], 1.0f);
}

// With room for one op in flight, a client that collects every result keeps submitting:
// results it consumed from the ring, which the daemon releases only after the commands
// posted before the consumption, never count against it.
TEST(TenantsTest, ACollectingClientIsNeverRefusedForUncollectedResults) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 1}\n");
  std::unique_ptr<Client> client;
  std::unique_ptr<Communicator> comm;
  ASSERT_NO_FATAL_FAILURE(AttachAlone(daemon, &client, &comm));
  int refused = 0;
  absl::Status first_refusal;
  for (int i = 0; i < 5000; ++i) {
    absl::Status status = comm->Nop();
    if (!status.ok() && refused++ == 0) first_refusal = status;
  }
  EXPECT_EQ(refused, 0) << first_refusal;
}

// A Submit waiting for room when the daemon stops ends with the reason, and the daemon
// exits without waiting for that op's deadline.
// Submits a nop that waits for room in a tenant that has none (the op's deadline and the
// call's 10 min), calls `end` once it waits, and returns how the Submit ended.
grpc::Status WaitForRoomUntil(const std::function<void(Daemon&, RawSession&)>& end) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 0}\n");
  RawSession session(daemon.runtime_dir());
  uint64_t handle = 0;
  EXPECT_TRUE(session.Join(session.NewToken(), 0, 1, &handle).ok());
  grpc::Status waited;
  std::thread waiting([&] {
    cclo::v1::SubmitRequest request;
    request.set_comm_handle(handle);
    request.set_collective(cclo::v1::NOP);
    request.set_timeout_ms(600'000);
    request.set_wait_for_room(true);
    std::unique_ptr<grpc::ClientContext> context = session.Context();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    cclo::v1::SubmitResponse response;
    waited = session.stub().Submit(context.get(), request, &response);
  });
  absl::SleepFor(absl::Milliseconds(500));  // gives the Submit time to reach its wait
  end(daemon, session);
  waiting.join();
  return waited;
}

TEST(TenantsTest, ASubmitWaitingForRoomEndsWhenTheDaemonStops) {
  grpc::Status waited = WaitForRoomUntil([](Daemon& daemon, RawSession&) {
    daemon.process().Signal(SIGTERM);
    const ProcessResult stopped = daemon.process().Wait(absl::Seconds(60));
    EXPECT_FALSE(stopped.timed_out) << stopped.output;
    EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  });
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE) << waited.error_message();
  EXPECT_EQ(waited.error_message(), "this daemon is shutting down");
}

TEST(TenantsTest, ASubmitWaitingForRoomEndsWithItsSession) {
  grpc::Status waited = WaitForRoomUntil([](Daemon&, RawSession& session) { session.Detach(); });
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE) << waited.error_message();
  EXPECT_EQ(waited.error_message(), "session is closing");
}

// Room that comes after a waiting Submit's call ended is not taken for it: the caller was
// told DEADLINE_EXCEEDED and never learns the op's id, so the op must not exist.
TEST(TenantsTest, RoomAfterAWaitingSubmitsCallEndedIsNotTakenForIt) {
  Daemon daemon("tenants:\n  - name: default\n    quotas: {inflight_ops: 2}\n");
  RawSession session(daemon.runtime_dir());
  uint64_t handle = 0;
  ASSERT_TRUE(session.Join(session.NewToken(), 0, 1, &handle).ok());
  // A receive that no send meets, and one that waits for it: the quota is full.
  cclo::v1::SubmitRequest receive = AllreduceRequest(handle, session.Alloc(4096), 16);
  receive.set_collective(cclo::v1::RECV);
  receive.clear_send();
  receive.set_timeout_ms(600'000);
  cclo::v1::SubmitResponse running;
  ASSERT_TRUE(session.stub().Submit(session.Context().get(), receive, &running).ok());
  cclo::v1::SubmitRequest held_request = receive;
  held_request.mutable_recv()->set_offset(1024);
  held_request.add_after(running.op_id());
  cclo::v1::SubmitResponse held;
  ASSERT_TRUE(session.stub().Submit(session.Context().get(), held_request, &held).ok());

  cclo::v1::SubmitRequest waiting = receive;
  waiting.mutable_recv()->set_offset(2048);
  waiting.set_wait_for_room(true);
  std::unique_ptr<grpc::ClientContext> short_call = session.Context();
  short_call->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(250));
  cclo::v1::SubmitResponse response;
  const grpc::Status gave_up = session.stub().Submit(short_call.get(), waiting, &response);
  EXPECT_EQ(gave_up.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << gave_up.error_message();
  // Room comes now.
  cclo::v1::CancelRequest cancel;
  cancel.set_op_id(held.op_id());
  cclo::v1::CancelResponse cancelled;
  ASSERT_TRUE(session.stub().Cancel(session.Context().get(), cancel, &cancelled).ok());
  EXPECT_EQ(Used(daemon, "default", "inflight_ops"), 1u);
}

}  // namespace
}  // namespace cclo::testing
