// Helpers of the e2e tests that drive daemons by hand: two-rank communicators of raw
// sessions, receive requests, ops submitted and waited for, and ccloctl answers parsed
// from JSON.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "cclo/v1/client.pb.h"
#include "google/protobuf/util/json_util.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {

/// Joins `a` as rank 0 and `b` as rank 1 of a new communicator rooted at `a`'s daemon;
/// returns their handles.
std::pair<uint64_t, uint64_t> JoinPair(RawSession& a, RawSession& b);

/// Runs an allreduce on both ranks of a pair; both must succeed.
void ExpectPairAllreduce(RawSession& a, uint64_t handle_a, RawSession& b, uint64_t handle_b);

/// A float32 receive of 256 elements with tag 7 from rank `from` into `buffer`.
cclo::v1::SubmitRequest RecvRequest(uint64_t handle, uint64_t buffer, uint32_t from);

/// Submits `request` with a 60 s deadline on `session`, which must accept it; the op id.
uint64_t Submit(RawSession& session, cclo::v1::SubmitRequest request);

/// Waits (up to 30 s) for op `op_id` of `session` to end, which it must; its result.
cclo::v1::WaitResponse WaitOp(RawSession& session, uint64_t op_id);

/// `ccloctl args... --json` against `daemon`, which must succeed, parsed.
template <typename Response>
Response AdminJson(const Daemon& daemon, std::vector<std::string> args) {
  args.push_back("--json");
  ProcessResult result = Ccloctl(daemon, args);
  Response response;
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.output, &response).ok())
      << result.output;
  return response;
}

}  // namespace cclo::testing
