#include "daemon/sessions.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace cclo::daemon {
namespace {

constexpr uint64_t kHandle = 7;

// Records the order in which a session starts ops.
struct Started {
  std::vector<uint64_t> ids;
};

// An op on `handle` waiting for `after`, whose start records its id in `started`.
NewOp Op(Started& started, std::vector<uint64_t> after = {}, uint64_t handle = kHandle) {
  NewOp op;
  op.comm_handle = handle;
  op.after = std::move(after);
  op.what = {hw::Collective::kAllreduce, 0, {0xab}};
  op.start = [&started](uint64_t op_id) {
    started.ids.push_back(op_id);
    return absl::OkStatus();
  };
  return op;
}

uint64_t Add(Session& session, NewOp op) {
  absl::StatusOr<uint64_t> id = session.AddOp(std::move(op));
  EXPECT_TRUE(id.ok()) << id.status();
  return id.value_or(0);
}

OpResult Result(absl::Status status) { return {hw::Completion{std::move(status), "ring", 0}, {}}; }

// The status the op ended with; fails the test if it has not ended.
absl::Status Ended(Session& session, uint64_t op_id) {
  absl::StatusOr<std::optional<OpResult>> waited = session.WaitOp(op_id, absl::ZeroDuration());
  if (!waited.ok()) return waited.status();
  if (!waited->has_value()) return absl::InternalError("op has not ended");
  return (*waited)->completion.status;
}

TEST(SessionTest, ConcurrentWaitsOnOneOpCollectItOnce) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t op = Add(session, Op(started));
  absl::StatusOr<std::optional<OpResult>> first, second;
  std::thread a([&] { first = session.WaitOp(op, absl::Seconds(30)); });
  std::thread b([&] { second = session.WaitOp(op, absl::Seconds(30)); });
  session.FinishOp(op, {hw::Completion{absl::OkStatus(), "ring", 64}, absl::Milliseconds(1)});
  a.join();
  b.join();
  // Exactly one waiter gets the result; the other learns the op was collected.
  const bool first_won = first.ok() && first->has_value();
  const bool second_won = second.ok() && second->has_value();
  EXPECT_NE(first_won, second_won);
  const auto& loser = first_won ? second : first;
  ASSERT_FALSE(loser.ok());
  EXPECT_EQ(loser.status().code(), absl::StatusCode::kNotFound);
  const auto& winner = first_won ? first : second;
  EXPECT_EQ((*winner)->completion.algorithm, "ring");
}

// Results nobody collects are kept up to a limit; then new ops are refused until one is
// collected, and nothing of the refused op is registered.
TEST(SessionTest, UncollectedResultsAreLimited) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  auto limited = [&] {
    NewOp op = Op(started);
    op.max_uncollected = 2;
    return op;
  };
  std::vector<uint64_t> ops;
  for (int i = 0; i < 2; ++i) {
    ops.push_back(Add(session, limited()));
    session.FinishOp(ops.back(), Result(i == 0 ? absl::OkStatus() : absl::InternalError("x")));
  }
  absl::StatusOr<uint64_t> refused = session.AddOp(limited());
  EXPECT_EQ(refused.status(),
            absl::ResourceExhaustedError(
                "this session keeps 2 finished ops whose results were not collected, as many "
                "as it may (the tenant's inflight_ops quota plus two completion rings); Wait "
                "for them, or on the command ring release the failed ones"));
  EXPECT_EQ(session.CountOps().done, 2u);
  EXPECT_TRUE(Ended(session, ops[0]).ok());
  const uint64_t next = Add(session, limited());
  session.ReleaseOp(ops[1]);
  session.FinishOp(next, Result(absl::OkStatus()));
  EXPECT_EQ(session.CountOps().done, 1u);
  EXPECT_EQ(started.ids.size(), 3u);
}

TEST(SessionTest, WaitTimesOutWithoutResultAndKeepsTheOp) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t op = Add(session, Op(started));
  absl::StatusOr<std::optional<OpResult>> waited = session.WaitOp(op, absl::Milliseconds(1));
  ASSERT_TRUE(waited.ok());
  EXPECT_FALSE(waited->has_value());
  session.FinishOp(op, Result(absl::UnavailableError("lost")));
  EXPECT_EQ(Ended(session, op).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(session.WaitOp(op, absl::ZeroDuration()).status().code(), absl::StatusCode::kNotFound);
}

// A result found for a Wait whose caller already left stays for the caller's next Wait.
TEST(SessionTest, AWaitWhoseCallerLeftLeavesTheResult) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t op = Add(session, Op(started));
  session.FinishOp(op, Result(absl::InternalError("x")));
  absl::StatusOr<std::optional<OpResult>> left =
      session.WaitOp(op, absl::Seconds(30), [] { return true; });
  EXPECT_EQ(left.status(),
            absl::CancelledError(absl::StrCat("the Wait call ended (cancelled, or past its "
                                              "deadline); op ",
                                              op, "'s result is kept for the next Wait")));
  EXPECT_EQ(session.CountOps().done, 1u);
  EXPECT_EQ(Ended(session, op), absl::InternalError("x"));
}

TEST(SessionTest, CloseWakesWaiters) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t op = Add(session, Op(started));
  absl::StatusOr<std::optional<OpResult>> waited;
  std::thread waiter([&] { waited = session.WaitOp(op, absl::Minutes(5)); });
  session.Close();
  waiter.join();
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kUnavailable);
}

TEST(SessionTest, OpIdsDifferAcrossSessions) {
  Session first(1, "a", {}, -1, nullptr, {}), second(2, "b", {}, -1, nullptr, {});
  Started started;
  const uint64_t op = Add(first, Op(started));
  absl::StatusOr<uint64_t> foreign = second.AddOp(Op(started, {op}));
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(foreign.status().message(),
            absl::StrCat("after: no op ", op,
                         " in this session (never issued here, or already collected by Wait)"));
}

TEST(SessionTest, OpStartsOnlyAfterWhatItWaitsFor) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t first = Add(session, Op(started));
  bool held = false;
  NewOp dependent = Op(started, {first});
  dependent.held = [&](uint64_t) { held = true; };
  const uint64_t second = Add(session, std::move(dependent));
  EXPECT_TRUE(held);
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{first}));
  session.FinishOp(first, Result(absl::OkStatus()));
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{first, second}));
  // An op whose dependency finished OK (not collected yet) starts at once, unheld.
  NewOp late = Op(started, {first});
  late.held = [&](uint64_t) { ADD_FAILURE() << "an op free to start was held"; };
  const uint64_t third = Add(session, std::move(late));
  EXPECT_EQ(started.ids.back(), third);
}

// Past its first two links, an aborted chain's messages name the failure that began it and
// leave out the links between: they do not grow with the chain.
TEST(SessionTest, MessagesOfALongAbortedChainDoNotGrowWithIt) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  std::vector<uint64_t> chain = {Add(session, Op(started))};
  for (int link = 0; link < 1000; ++link)
    chain.push_back(Add(session, Op(started, {chain.back()})));
  session.FinishOp(chain[0], Result(absl::DeadlineExceededError("too late")));
  const std::string first =
      absl::StrCat("op ", chain[0], " that this op waits for failed: DEADLINE_EXCEEDED: too late");
  EXPECT_EQ(Ended(session, chain[1]).message(), first);
  EXPECT_EQ(Ended(session, chain[2]).message(),
            absl::StrCat("op ", chain[1], " that this op waits for failed: ABORTED: ", first));
  for (size_t link = 3; link < chain.size(); ++link) {
    const absl::Status ended = Ended(session, chain[link]);
    EXPECT_EQ(ended.code(), absl::StatusCode::kAborted);
    EXPECT_EQ(ended.message(),
              absl::StrCat("op ", chain[link - 1],
                           " that this op waits for failed: ABORTED: ...: ", first));
  }
}

TEST(SessionTest, FailedDependencyAbortsTheChain) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t first = Add(session, Op(started));
  const uint64_t second = Add(session, Op(started, {first}));
  const uint64_t third = Add(session, Op(started, {second}, kHandle + 1));
  session.FinishOp(first, Result(absl::DeadlineExceededError("too late")));
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{first}));
  const absl::Status aborted = Ended(session, second);
  EXPECT_EQ(aborted.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(aborted.message(), absl::StrCat("op ", first, " that this op waits for failed: ",
                                            "DEADLINE_EXCEEDED: too late"));
  EXPECT_EQ(
      Ended(session, third).message(),
      absl::StrCat("op ", second, " that this op waits for failed: ABORTED: ", aborted.message()));
  // A dependency that already failed (not collected yet) aborts a new op at once.
  const uint64_t failed = Add(session, Op(started));
  session.FinishOp(failed, Result(absl::UnavailableError("peer lost")));
  const uint64_t fourth = Add(session, Op(started, {failed}));
  EXPECT_EQ(Ended(session, fourth).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{first, failed}));
}

TEST(SessionTest, OpsOfOneHandleStartInSubmissionOrder) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t other = Add(session, Op(started, {}, kHandle + 1));
  const uint64_t blocked = Add(session, Op(started, {other}));
  const uint64_t behind = Add(session, Op(started));                      // same handle
  const uint64_t elsewhere = Add(session, Op(started, {}, kHandle + 2));  // another handle
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{other, elsewhere}));
  session.FinishOp(other, Result(absl::OkStatus()));
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{other, elsewhere, blocked, behind}));
}

TEST(SessionTest, BadAfterListsAreRefused) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t op = Add(session, Op(started));
  absl::StatusOr<uint64_t> twice = session.AddOp(Op(started, {op, op}));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(twice.status().message(), absl::StrCat("after lists op ", op, " twice"));
  absl::StatusOr<uint64_t> many = session.AddOp(Op(started, std::vector<uint64_t>(9, op)));
  EXPECT_EQ(many.status().message(), "after lists 9 ops; at most 8");
  session.FinishOp(op, Result(absl::OkStatus()));
  ASSERT_TRUE(Ended(session, op).ok());
  absl::StatusOr<uint64_t> collected = session.AddOp(Op(started, {op}));
  EXPECT_EQ(collected.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{op}));
}

TEST(SessionTest, CancelOnlyWhileWaiting) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t running = Add(session, Op(started));
  const uint64_t waiting = Add(session, Op(started, {running}));
  const uint64_t dependent = Add(session, Op(started, {waiting}, kHandle + 1));
  const uint64_t queued = Add(session, Op(started));  // behind `waiting` on its handle

  absl::Status refused = session.CancelOp(running);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(), absl::StrCat("op ", running,
                                            " already went to the engine, where it runs with the "
                                            "other ranks; it cannot be cancelled and goes on"));
  ASSERT_TRUE(session.CancelOp(waiting).ok());
  // The op behind it on the handle no longer waits; the op waiting for it is aborted.
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{running, queued}));
  const absl::Status cancelled = Ended(session, waiting);
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(cancelled.message(), absl::StrCat("op ", waiting, " was cancelled before it started"));
  EXPECT_EQ(Ended(session, dependent).code(), absl::StatusCode::kAborted);

  session.FinishOp(running, Result(absl::OkStatus()));
  EXPECT_EQ(session.CancelOp(running).message(), absl::StrCat("op ", running, " already finished"));
  ASSERT_TRUE(Ended(session, running).ok());
  EXPECT_EQ(session.CancelOp(running).code(), absl::StatusCode::kNotFound);
}

TEST(SessionTest, ExpiredWaitingOpSaysWhatItWaitedFor) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t running = Add(session, Op(started));
  const uint64_t waiting = Add(session, Op(started, {running}));
  const uint64_t queued = Add(session, Op(started));
  EXPECT_FALSE(session.ExpireOp(running).has_value());
  std::optional<absl::Status> expired = session.ExpireOp(queued);
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(expired->message(),
            absl::StrCat("allreduce on rank 0 of communicator ab000000000000000000000000000000 "
                         "did not finish by its deadline: "
                         "it was still queued behind op ",
                         waiting, " on the same communicator"));
  expired = session.ExpireOp(waiting);
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->message(),
            absl::StrCat("allreduce on rank 0 of communicator ab000000000000000000000000000000 "
                         "did not finish by its deadline: "
                         "it was still waiting for op ",
                         running));
  EXPECT_EQ(Ended(session, waiting), *expired);
  EXPECT_FALSE(session.ExpireOp(waiting).has_value());
}

TEST(SessionTest, OpThatCannotStartEndsWithTheReason) {
  Session session(1, "token", {}, -1, nullptr, {});
  NewOp op;
  op.comm_handle = kHandle;
  op.start = [](uint64_t) { return absl::UnavailableError("communicator is broken"); };
  const uint64_t id = Add(session, std::move(op));
  EXPECT_EQ(Ended(session, id), absl::UnavailableError("communicator is broken"));
}

TEST(SessionTest, CloseDropsWaitingOpsAndTheirBuffers) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t running = Add(session, Op(started));
  auto buffer = std::make_shared<int>(0);
  std::weak_ptr<int> watched = buffer;
  NewOp waiting = Op(started, {running});
  waiting.start = [buffer = std::move(buffer)](uint64_t) { return absl::OkStatus(); };
  Add(session, std::move(waiting));
  EXPECT_FALSE(watched.expired());
  session.Close();
  EXPECT_TRUE(watched.expired());
  session.FinishOp(running, Result(absl::OkStatus()));  // a late completion finds nothing
  EXPECT_EQ(started.ids, (std::vector<uint64_t>{running}));
  EXPECT_EQ(session.AddOp(Op(started)).status().code(), absl::StatusCode::kUnavailable);
}

TEST(SessionTest, HooksReportAcceptanceAndEveryEndWithoutTheEngine) {
  Session session(1, "token", {}, -1, nullptr, {});
  std::vector<std::string> events;
  // An op whose hooks log "<name> accepted|started|ended <code>".
  auto logged = [&](const std::string& name, std::vector<uint64_t> after, bool fail_start) {
    NewOp op;
    op.comm_handle = kHandle;
    op.after = std::move(after);
    op.accepted = [&events, name] { events.push_back(name + " accepted"); };
    op.start = [&events, name, fail_start](uint64_t) {
      events.push_back(name + " started");
      return fail_start ? absl::NotFoundError("handle gone") : absl::OkStatus();
    };
    op.ended = [&events, name](const absl::Status& status) {
      events.push_back(absl::StrCat(name, " ended ", absl::StatusCodeToString(status.code())));
    };
    return Add(session, std::move(op));
  };
  const uint64_t a = logged("a", {}, false);
  const uint64_t b = logged("b", {a}, false);
  logged("c", {b}, false);
  const uint64_t d = logged("d", {a}, false);
  logged("e", {}, true);  // queued behind d, its start fails
  ASSERT_TRUE(session.CancelOp(b).ok());
  session.FinishOp(a, Result(absl::OkStatus()));
  logged("f", {d}, false);  // still waiting when the session closes
  session.Close();
  EXPECT_EQ(events, (std::vector<std::string>{
                        "a accepted", "a started", "b accepted", "c accepted", "d accepted",
                        "e accepted", "b ended CANCELLED", "c ended ABORTED", "d started",
                        "e started", "e ended NOT_FOUND", "f accepted", "f ended CANCELLED"}));
}

TEST(SessionTest, CloseReportsAnEndOnlyAfterTheAcceptance) {
  Session session(1, "token", {}, -1, nullptr, {});
  Started started;
  const uint64_t running = Add(session, Op(started));
  absl::Mutex mu;
  std::vector<std::string> events;
  absl::Notification accepting, accept;
  NewOp waiting = Op(started, {running});
  waiting.accepted = [&] {
    accepting.Notify();
    accept.WaitForNotificationWithTimeout(absl::Seconds(30));
    absl::MutexLock lock(&mu);
    events.push_back("accepted");
  };
  waiting.ended = [&](const absl::Status& status) {
    absl::MutexLock lock(&mu);
    events.push_back(absl::StrCat("ended ", absl::StatusCodeToString(status.code())));
  };
  std::thread adding([&] { Add(session, std::move(waiting)); });
  accepting.WaitForNotification();
  std::thread closing([&] { session.Close(); });
  // Time for a Close that does not wait for the acceptance to report the end first.
  absl::SleepFor(absl::Milliseconds(300));
  accept.Notify();
  adding.join();
  closing.join();
  EXPECT_EQ(events, (std::vector<std::string>{"accepted", "ended CANCELLED"}));
}

}  // namespace
}  // namespace cclo::daemon
