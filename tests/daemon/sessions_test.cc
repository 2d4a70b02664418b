#include "daemon/sessions.h"

#include <gtest/gtest.h>

#include <thread>

namespace cclo::daemon {
namespace {

TEST(SessionTest, ConcurrentWaitsOnOneOpCollectItOnce) {
  Session session(1, "token", {}, -1);
  const uint64_t op = session.StartOp();
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

TEST(SessionTest, WaitTimesOutWithoutResultAndKeepsTheOp) {
  Session session(1, "token", {}, -1);
  const uint64_t op = session.StartOp();
  absl::StatusOr<std::optional<OpResult>> waited = session.WaitOp(op, absl::Milliseconds(1));
  ASSERT_TRUE(waited.ok());
  EXPECT_FALSE(waited->has_value());
  session.FinishOp(op, {hw::Completion{absl::UnavailableError("lost"), "", 0}, {}});
  waited = session.WaitOp(op, absl::ZeroDuration());
  ASSERT_TRUE(waited.ok() && waited->has_value());
  EXPECT_EQ((*waited)->completion.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(session.WaitOp(op, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SessionTest, CloseWakesWaiters) {
  Session session(1, "token", {}, -1);
  const uint64_t op = session.StartOp();
  absl::StatusOr<std::optional<OpResult>> waited;
  std::thread waiter([&] { waited = session.WaitOp(op, absl::Minutes(5)); });
  session.Close();
  waiter.join();
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cclo::daemon
