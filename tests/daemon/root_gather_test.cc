#include "daemon/root_gather.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/token.h"
#include "firmware/registry.h"
#include "hw/clock.h"
#include "hw/poe/wire.h"

namespace cclo::daemon {
namespace {

static_assert(firmware::kSelectionVersion == 1, "the expected messages below name selection 1");
static_assert(hw::poe::kWireVersion == 7, "the expected messages below name wire version 7");

// A join of `rank` of a communicator of `size`, with its proof, from a daemon of `selection`.
cclo::v1::PeerJoinRequest JoinFrom(const CommToken& token, uint32_t rank, uint32_t size,
                                   uint32_t selection) {
  cclo::v1::PeerJoinRequest request;
  request.set_version(1);
  request.set_selection(selection);
  request.set_wire_version(hw::poe::kWireVersion);
  request.set_comm_id(std::string(token.id.begin(), token.id.end()));
  request.set_rank(rank);
  request.set_size(size);
  request.set_daemon_address(absl::StrCat("10.0.0.", rank + 2, ":7470"));
  request.set_data_address(absl::StrCat("10.0.0.", rank + 2, ":7471"));
  request.set_timeout_ms(30'000);
  request.set_proof(Proof(token.secret, JoinMessage(request)));
  return request;
}

cclo::v1::CommPolicy RootPolicy() {
  cclo::v1::CommPolicy policy;
  policy.set_root_address("10.0.0.1:7470");
  policy.set_selection(firmware::kSelectionVersion);
  policy.set_wire_version(hw::poe::kWireVersion);
  return policy;
}

// A daemon of another release: its built-in selection and data wire version.
struct OtherRelease {
  uint32_t selection;
  uint32_t wire_version;
  std::string message;
};

class RootGatherOtherReleaseTest : public ::testing::TestWithParam<OtherRelease> {};

// The rank of the other selection or data wire version is refused, and so is the rank that
// waits for it: at once, not at its deadline, with the reason. Later joins get the same
// answer.
TEST_P(RootGatherOtherReleaseTest, ARankOfAnotherReleaseFailsTheJoinNamingBoth) {
  RootGather gather(absl::Minutes(1));
  const CommToken token = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(token.id, token.secret, RootPolicy(), 1).ok());
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Seconds(30);
  absl::StatusOr<cclo::v1::PeerJoinResponse> waiting;
  std::thread first(
      [&] { waiting = gather.Join(JoinFrom(token, 0, 2, firmware::kSelectionVersion), deadline); });
  // Gives rank 0 time to reach its wait, so that the wake-up is what is tested; a join
  // arriving after the refusal gets the same answer, so either order passes.
  absl::SleepFor(absl::Milliseconds(200));
  cclo::v1::PeerJoinRequest other = JoinFrom(token, 1, 2, GetParam().selection);
  other.set_wire_version(GetParam().wire_version);
  absl::StatusOr<cclo::v1::PeerJoinResponse> refused = gather.Join(other, deadline);
  first.join();
  const absl::Status expected = absl::FailedPreconditionError(GetParam().message);
  EXPECT_EQ(refused.status(), expected);
  EXPECT_EQ(waiting.status(), expected);
}

INSTANTIATE_TEST_SUITE_P(
    OlderAndNewer, RootGatherOtherReleaseTest,
    ::testing::Values(
        OtherRelease{0, hw::poe::kWireVersion,
                     "rank 1's daemon at 10.0.0.3:7470 chooses built-in algorithms by "
                     "selection 0 (a release from before selections were numbered) and the "
                     "root daemon by selection 1: all daemons of a communicator must run "
                     "releases of one selection"},
        OtherRelease{2, hw::poe::kWireVersion,
                     "rank 1's daemon at 10.0.0.3:7470 chooses built-in algorithms by "
                     "selection 2 and the root daemon by selection 1: all daemons of a "
                     "communicator must run releases of one selection"},
        // A release from before joins carried the data wire version, whose data sessions
        // the root's daemon would refuse.
        OtherRelease{firmware::kSelectionVersion, 0,
                     "rank 1's daemon at 10.0.0.3:7470 speaks data wire version 4 or older (a "
                     "release from before joins carried it) and the root daemon version 7: all "
                     "daemons of a communicator must speak one data wire version"},
        // The release before this one: its messages do not carry their call's algorithm.
        OtherRelease{firmware::kSelectionVersion, 6,
                     "rank 1's daemon at 10.0.0.3:7470 speaks data wire version 6 and the root "
                     "daemon version 7: all daemons of a communicator must speak one data wire "
                     "version"},
        OtherRelease{firmware::kSelectionVersion, 8,
                     "rank 1's daemon at 10.0.0.3:7470 speaks data wire version 8 and the root "
                     "daemon version 7: all daemons of a communicator must speak one data wire "
                     "version"}));

TEST(RootGatherTest, TheAnswerCarriesTheRootsSelection) {
  RootGather gather(absl::Minutes(1));
  const CommToken token = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(token.id, token.secret, RootPolicy(), 1).ok());
  absl::StatusOr<cclo::v1::PeerJoinResponse> joined = gather.Join(
      JoinFrom(token, 0, 1, firmware::kSelectionVersion), hw::SteadyNow() + absl::Seconds(30));
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->ranks_size(), 1);
  EXPECT_EQ(joined->policy().selection(), firmware::kSelectionVersion);
}

// A size beyond the largest communicator is refused before anything is kept for it.
TEST(RootGatherTest, ASizeAboveTheLargestWorldIsRefused) {
  RootGather gather(absl::Minutes(1));
  const CommToken token = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(token.id, token.secret, RootPolicy(), 1).ok());
  absl::StatusOr<cclo::v1::PeerJoinResponse> joined =
      gather.Join(JoinFrom(token, 0, kMaxWorldSize + 1, firmware::kSelectionVersion),
                  hw::SteadyNow() + absl::Seconds(30));
  EXPECT_EQ(joined.status(),
            absl::InvalidArgumentError("communicator size 65537 is not in [1, 65536]"));
}

// The addresses a joining daemon gives go into every rank's table, logs and errors.
TEST(RootGatherTest, AnAddressThatIsNotHostPortIsRefused) {
  RootGather gather(absl::Minutes(1));
  const CommToken token = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(token.id, token.secret, RootPolicy(), 1).ok());
  cclo::v1::PeerJoinRequest forged = JoinFrom(token, 0, 1, firmware::kSelectionVersion);
  forged.set_data_address("10.0.0.2:7471\n[error] forged line:1");
  forged.set_proof(Proof(token.secret, JoinMessage(forged)));
  EXPECT_EQ(gather.Join(forged, hw::SteadyTime::InfiniteFuture()).status(),
            absl::InvalidArgumentError(
                "rank 0's daemon gives an unusable address '10.0.0.2:7471\\n[error] forged line:1' "
                "is not "
                "host:port (printable characters without spaces, then a port from 1 to 65535)"));
  // The refusal fails nothing: the rank may join with a good address.
  EXPECT_TRUE(gather
                  .Join(JoinFrom(token, 0, 1, firmware::kSelectionVersion),
                        hw::SteadyTime::InfiniteFuture())
                  .ok());
}

// The deadline message names the first missing ranks and counts the rest, and a rank that
// arrives after the gather failed learns why instead of "not the root".
TEST(RootGatherTest, ALateRankLearnsWhyTheGatherFailed) {
  RootGather gather(absl::Minutes(1));
  const CommToken token = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(token.id, token.secret, RootPolicy(), 1).ok());
  const uint32_t size = kMaxWorldSize;
  absl::StatusOr<cclo::v1::PeerJoinResponse> first =
      gather.Join(JoinFrom(token, 0, size, firmware::kSelectionVersion),
                  hw::SteadyNow() + absl::Milliseconds(1));
  const absl::Status expected = absl::DeadlineExceededError(absl::StrCat(
      "communicator ", hw::CommIdHex(token.id),
      ": only 1 of 65536 ranks joined before the "
      "deadline; missing ranks 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 and 65519 more"));
  EXPECT_EQ(first.status(), expected);
  absl::StatusOr<cclo::v1::PeerJoinResponse> late = gather.Join(
      JoinFrom(token, 1, size, firmware::kSelectionVersion), hw::SteadyNow() + absl::Seconds(30));
  EXPECT_EQ(late.status(), expected);
}

// A rank whose daemon gave its join up (its client was killed while joining) leaves the
// gather: the others are not answered with a table naming it, and a new client's rank of
// that number takes its place.
TEST(RootGatherTest, ARankWhoseDaemonGaveItsJoinUpLeavesTheGather) {
  RootGather gather(absl::Minutes(1));
  const CommToken token = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(token.id, token.secret, RootPolicy(), 1).ok());
  std::atomic<bool> left = false;
  absl::StatusOr<cclo::v1::PeerJoinResponse> given_up;
  std::thread joining([&] {
    given_up = gather.Join(JoinFrom(token, 1, 2, firmware::kSelectionVersion),
                           hw::SteadyTime::InfiniteFuture(), [&left] { return left.load(); });
  });
  left = true;
  joining.join();
  EXPECT_EQ(given_up.status(),
            absl::CancelledError("the call ended before all ranks joined (its daemon gave it up, "
                                 "or the connection was lost); rank 1 may join again"));

  absl::StatusOr<cclo::v1::PeerJoinResponse> rank0;
  std::thread first([&] {
    rank0 = gather.Join(JoinFrom(token, 0, 2, firmware::kSelectionVersion),
                        hw::SteadyTime::InfiniteFuture());
  });
  cclo::v1::PeerJoinRequest again = JoinFrom(token, 1, 2, firmware::kSelectionVersion);
  again.set_daemon_address("10.0.0.9:7470");
  again.set_proof(Proof(token.secret, JoinMessage(again)));
  absl::StatusOr<cclo::v1::PeerJoinResponse> rank1 =
      gather.Join(again, hw::SteadyTime::InfiniteFuture());
  first.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_EQ(rank0->ranks_size(), 2);
  EXPECT_EQ(rank0->ranks(1).daemon_address(), "10.0.0.9:7470");
}

// A new join of a rank whose daemon gave its join up (its client restarted at once) takes
// its place before the old call's next check finds that its caller left; the old call then
// leaves that place alone.
TEST(RootGatherTest, ARankWhoseDaemonGaveItsJoinUpIsReplacedAtOnce) {
  RootGather gather(absl::Minutes(1));
  const CommToken token = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(token.id, token.secret, RootPolicy(), 1).ok());
  absl::Notification old_waits;
  std::atomic<bool> left = false;
  absl::StatusOr<cclo::v1::PeerJoinResponse> given_up;
  std::thread joining([&] {
    given_up = gather.Join(JoinFrom(token, 1, 2, firmware::kSelectionVersion),
                           hw::SteadyTime::InfiniteFuture(), [&] {
                             if (!old_waits.HasBeenNotified()) old_waits.Notify();
                             return left.load();
                           });
  });
  old_waits.WaitForNotification();
  left = true;
  cclo::v1::PeerJoinRequest again = JoinFrom(token, 1, 2, firmware::kSelectionVersion);
  again.set_daemon_address("10.0.0.9:7470");
  again.set_proof(Proof(token.secret, JoinMessage(again)));
  absl::Notification new_waits_or_ended;
  absl::StatusOr<cclo::v1::PeerJoinResponse> rank1;
  std::thread replacing([&] {
    rank1 = gather.Join(again, hw::SteadyTime::InfiniteFuture(), [&] {
      if (!new_waits_or_ended.HasBeenNotified()) new_waits_or_ended.Notify();
      return false;
    });
    if (!new_waits_or_ended.HasBeenNotified()) new_waits_or_ended.Notify();
  });
  new_waits_or_ended.WaitForNotification();
  joining.join();
  EXPECT_EQ(given_up.status().code(), absl::StatusCode::kCancelled) << given_up.status();

  absl::StatusOr<cclo::v1::PeerJoinResponse> rank0 = gather.Join(
      JoinFrom(token, 0, 2, firmware::kSelectionVersion), hw::SteadyTime::InfiniteFuture());
  replacing.join();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_EQ(rank0->ranks_size(), 2);
  EXPECT_EQ(rank0->ranks(1).daemon_address(), "10.0.0.9:7470");
  // Every call left: the completed gather is forgotten.
  EXPECT_EQ(gather
                .Join(JoinFrom(token, 0, 2, firmware::kSelectionVersion),
                      hw::SteadyTime::InfiniteFuture())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

// A tenant may have as many gathers pending at one root as its communicators quota; other
// tenants are not held back by it, and a completed gather frees its place.
TEST(RootGatherTest, PendingGathersAreLimitedPerTenant) {
  RootGather gather(absl::Minutes(1));
  cclo::v1::CommPolicy alpha = RootPolicy();
  alpha.set_tenant("alpha");
  cclo::v1::CommPolicy beta = RootPolicy();
  beta.set_tenant("beta");
  const CommToken first = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(first.id, first.secret, alpha, 2).ok());
  const CommToken second = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(second.id, second.secret, alpha, 2).ok());
  const CommToken third = NewToken("10.0.0.1:7470");
  EXPECT_EQ(gather.Register(third.id, third.secret, alpha, 2),
            absl::ResourceExhaustedError(
                "tenant 'alpha' already has 2 communicators rooted here that not all ranks "
                "joined (its communicators quota); join them, or wait until unused tokens "
                "expire (after 1h) or failed ones are forgotten (after 1m)"));
  EXPECT_TRUE(gather.Register(third.id, third.secret, beta, 2).ok());
  ASSERT_TRUE(gather
                  .Join(JoinFrom(first, 0, 1, firmware::kSelectionVersion),
                        hw::SteadyNow() + absl::Seconds(30))
                  .ok());
  const CommToken fourth = NewToken("10.0.0.1:7470");
  EXPECT_TRUE(gather.Register(fourth.id, fourth.secret, alpha, 2).ok());
}

// A join asking for no time is refused, and leaves the gather to the others; one asking
// for more than the root's own join timeout waits that long.
TEST(RootGatherTest, TheWaitIsAtLeastOneMillisecondAndAtMostTheRootsJoinTimeout) {
  RootGather gather(absl::Milliseconds(200));
  const CommToken token = NewToken("10.0.0.1:7470");
  ASSERT_TRUE(gather.Register(token.id, token.secret, RootPolicy(), 1).ok());
  cclo::v1::PeerJoinRequest no_time = JoinFrom(token, 0, 2, firmware::kSelectionVersion);
  no_time.set_timeout_ms(0);
  no_time.set_proof(Proof(token.secret, JoinMessage(no_time)));
  EXPECT_EQ(gather.Join(no_time, hw::SteadyTime::InfiniteFuture()).status(),
            absl::InvalidArgumentError("rank 0 joins with timeout_ms 0 (at least 1)"));

  cclo::v1::PeerJoinRequest long_wait = JoinFrom(token, 0, 2, firmware::kSelectionVersion);
  long_wait.set_timeout_ms(UINT32_MAX);
  long_wait.set_proof(Proof(token.secret, JoinMessage(long_wait)));
  const hw::SteadyTime start = hw::SteadyNow();
  const absl::Status waited = gather.Join(long_wait, hw::SteadyTime::InfiniteFuture()).status();
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_NE(waited.message().find("only 1 of 2 ranks joined before the deadline; missing ranks 1"),
            std::string::npos)
      << waited;
  EXPECT_LT(hw::SteadyNow() - start, absl::Seconds(10));
}

// A joining rank gives the root 9/10 of its time, and never 0 ms however little is left.
TEST(RootGatherTest, AJoiningRankAsksForAtLeastOneMillisecond) {
  EXPECT_EQ(JoinTimeoutMs(absl::Seconds(10)), 9000u);
  EXPECT_EQ(JoinTimeoutMs(absl::Milliseconds(1)), 1u);
  EXPECT_EQ(JoinTimeoutMs(absl::ZeroDuration()), 1u);
  EXPECT_EQ(JoinTimeoutMs(-absl::Seconds(1)), 1u);
  EXPECT_EQ(JoinTimeoutMs(absl::InfiniteDuration()), UINT32_MAX);
}

// What a member says of a root of another data wire version.
TEST(RootGatherTest, SameWireVersionNamesBothDaemons) {
  EXPECT_TRUE(SameWireVersion(7, "root daemon a:1", "this daemon").ok());
  EXPECT_EQ(SameWireVersion(6, "root daemon a:1", "this daemon"),
            absl::FailedPreconditionError(
                "root daemon a:1 speaks data wire version 6 and this daemon version 7: all "
                "daemons of a communicator must speak one data wire version"));
}

// What a member says of a root of another selection.
TEST(RootGatherTest, SameSelectionNamesBothDaemons) {
  EXPECT_TRUE(SameSelection(1, "root daemon a:1", "this daemon").ok());
  EXPECT_EQ(SameSelection(0, "root daemon a:1", "this daemon"),
            absl::FailedPreconditionError(
                "root daemon a:1 chooses built-in algorithms by selection 0 (a release from "
                "before selections were numbered) and this daemon by selection 1: all daemons "
                "of a communicator must run releases of one selection"));
}

}  // namespace
}  // namespace cclo::daemon
