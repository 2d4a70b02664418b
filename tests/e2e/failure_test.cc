// Failure semantics across real daemons: a client killed mid-communicator, a peer daemon
// stopped or killed (SIGKILL) mid-op, and an op that can never complete. The survivors get
// a clear error, fast, keep serving and leak nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cclo/v1/admin.pb.h"
#include "cclo/v1/client.grpc.pb.h"
#include "cclo/v1/peer.grpc.pb.h"
#include "daemon/root_gather.h"
#include "daemon/token.h"
#include "firmware/registry.h"
#include "hw/poe/wire.h"
#include "hw/process.h"
#include "tests/e2e/cluster.h"
#include "tests/e2e/footprint.h"
#include "tests/e2e/pairs.h"
#include "tests/e2e/raw_session.h"
#include "tests/hw/emu/fake_peer.h"
#include "tests/loopback/loopback.h"

namespace cclo::testing {
namespace {

TEST(FailureTest, KilledClientBreaksTheCommunicatorForItsPeers) {
  Daemon a, b;
  RawSession rank0(a.runtime_dir());
  const std::string token = rank0.NewToken();
  // Rank 1 is a real client process that joins and then blocks in an allreduce.
  Process rank1({Runfile("client/cclo-run"), "run", "--runtime-dir", b.runtime_dir(), "--token",
                 token, "--rank", "1", "--size", "2", "--ops", "allreduce", "--sizes", "1M"});
  uint64_t handle = 0;
  grpc::Status joined = rank0.Join(token, 0, 2, &handle);
  ASSERT_TRUE(joined.ok()) << joined.error_message();
  rank1.Signal(SIGKILL);
  EXPECT_EQ(rank1.Wait(absl::Seconds(10)).exit_code, -1);

  grpc::Status status = rank0.Run(AllreduceRequest(handle, rank0.Alloc(1 << 20), 1 << 18));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_NE(status.error_message().find("rank 1"), std::string::npos) << status.error_message();

  // Both daemons keep serving new communicators.
  RawSession again0(a.runtime_dir()), again1(b.runtime_dir());
  auto [h0, h1] = JoinPair(again0, again1);
  ExpectPairAllreduce(again0, h0, again1, h1);
}

TEST(FailureTest, StoppedPeerDaemonFailsPendingOpsAndExitsCleanly) {
  Daemon a;
  auto b = std::make_unique<Daemon>();
  const std::string b_dir = b->runtime_dir();
  RawSession rank0(a.runtime_dir());
  RawSession rank1(b_dir);
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  const uint64_t buffer = rank0.Alloc(4096);

  grpc::Status pending;
  std::thread receiver([&] { pending = rank0.Run(RecvRequest(handle0, buffer, 1)); });
  b->process().Signal(SIGTERM);
  ProcessResult stopped = b->process().Wait(absl::Seconds(20));
  receiver.join();

  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_NE(stopped.output.find("cclod stopped"), std::string::npos) << stopped.output;
  struct stat ignored;
  for (const char* socket : {"/attach.sock", "/client.sock", "/admin.sock"}) {
    EXPECT_NE(stat((b_dir + socket).c_str(), &ignored), 0) << socket << " left behind";
  }
  EXPECT_EQ(pending.error_code(), grpc::StatusCode::UNAVAILABLE) << pending.error_message();
  EXPECT_FALSE(pending.error_message().empty());
  // Later ops on the broken communicator fail at once with the reason.
  grpc::Status later = rank0.Run(RecvRequest(handle0, buffer, 1));
  EXPECT_EQ(later.error_code(), grpc::StatusCode::UNAVAILABLE) << later.error_message();
  EXPECT_NE(later.error_message().find("broken"), std::string::npos) << later.error_message();
}

TEST(FailureTest, KilledPeerDaemonFailsSurvivorsFastAndLeavesThemWorking) {
  Daemon a, b;
  auto c = std::make_unique<Daemon>();
  const std::string lost = c->data_address();

  // 1. A communicator of a and b only; it works before and after c dies.
  RawSession pair0(a.runtime_dir()), pair1(b.runtime_dir());
  auto [pair_handle0, pair_handle1] = JoinPair(pair0, pair1);
  ExpectPairAllreduce(pair0, pair_handle0, pair1, pair_handle1);

  // 2. A communicator over a, b and c whose ranks on a and b wait in an allreduce for
  // rank 2 on c, which never submits. With the pair, it is all that a knows so far.
  RawSession trio0(a.runtime_dir()), trio1(b.runtime_dir()), trio2(c->runtime_dir());
  const std::string trio_token = trio0.NewToken();
  std::vector<RawSession*> trio = {&trio0, &trio1, &trio2};
  std::vector<uint64_t> trio_handles(3);
  std::vector<std::thread> joins;
  for (uint32_t rank = 0; rank < 3; ++rank) {
    joins.emplace_back([&, rank] {
      grpc::Status joined = trio[rank]->Join(trio_token, rank, 3, &trio_handles[rank]);
      EXPECT_TRUE(joined.ok()) << joined.error_message();
    });
  }
  for (std::thread& join : joins) join.join();
  std::set<std::string> known;
  const auto before = AdminJson<cclo::v1::ListCommunicatorsResponse>(a, {"comms"});
  for (const auto& comm : before.communicators()) known.insert(comm.comm_id());
  ASSERT_EQ(known.size(), 2u);
  constexpr uint64_t kTrioCount = 1 << 18;
  std::vector<uint64_t> trio_buffers, trio_ops;
  for (RawSession* session : {&trio0, &trio1}) {
    trio_buffers.push_back(session->Alloc(kTrioCount * 4));
    cclo::v1::SubmitRequest request =
        AllreduceRequest(trio_handles[trio_ops.size()], trio_buffers.back(), kTrioCount);
    request.set_timeout_ms(60'000);
    cclo::v1::SubmitResponse submitted;
    grpc::Status status = session->stub().Submit(session->Context().get(), request, &submitted);
    ASSERT_TRUE(status.ok()) << status.error_message();
    trio_ops.push_back(submitted.op_id());
  }

  // 3. Three cclo-run clients in a long allreduce loop (op deadline 60 s) on a third
  // communicator. Once a has finished some of its ops, c dies mid-loop.
  const std::string token = NewToken(a);
  std::vector<std::unique_ptr<Process>> loop;
  for (Daemon* daemon : {&a, &b, c.get()}) {
    loop.push_back(std::make_unique<Process>(std::vector<std::string>{
        Runfile("client/cclo-run"), "run", "--runtime-dir", daemon->runtime_dir(), "--token", token,
        "--rank", absl::StrCat(loop.size()), "--size", "3", "--ops", "allreduce", "--sizes", "4M",
        "--iters", "1000000", "--op-timeout", "60"}));
  }
  std::string loop_id;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto now = AdminJson<cclo::v1::ListCommunicatorsResponse>(a, {"comms"});
        for (const auto& comm : now.communicators()) {
          if (!known.count(comm.comm_id()) && comm.ops_completed() >= 2) {
            loop_id = comm.comm_id();
          }
        }
        return !loop_id.empty();
      },
      absl::Seconds(60)))
      << loop[0]->Output();
  c->process().Signal(SIGKILL);
  EXPECT_EQ(c->process().Wait(absl::Seconds(10)).exit_code, -1);

  // 4. The loop's surviving ranks fail, naming the lost peer; the client on c loses its
  // daemon. None waits for the op deadline.
  for (size_t rank = 0; rank < loop.size(); ++rank) {
    ProcessResult result = loop[rank]->Wait(absl::Seconds(50));
    EXPECT_FALSE(result.timed_out) << "rank " << rank << ":\n" << result.output;
    EXPECT_EQ(result.exit_code, 1) << "rank " << rank << ":\n" << result.output;
    if (rank < 2) {
      EXPECT_NE(result.output.find(absl::StrCat("rank ", rank, ": allreduce 4194304 bytes: ")),
                std::string::npos)
          << result.output;
      EXPECT_NE(result.output.find(lost), std::string::npos) << result.output;
    }
  }

  // 5. The pending trio ops fail with UNAVAILABLE naming the lost peer, and a shows the
  // communicator broken for that reason; later ops fail at once.
  for (size_t rank = 0; rank < 2; ++rank) {
    cclo::v1::WaitRequest wait;
    wait.set_op_id(trio_ops[rank]);
    wait.set_timeout_ms(20'000);
    cclo::v1::WaitResponse done;
    grpc::Status status = trio[rank]->stub().Wait(trio[rank]->Context().get(), wait, &done);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_TRUE(done.done()) << "rank " << rank << " still waits";
    EXPECT_EQ(done.code(), grpc::StatusCode::UNAVAILABLE) << done.message();
    EXPECT_NE(done.message().find(lost), std::string::npos) << done.message();
  }
  const std::string trio_id = *std::find_if(known.begin(), known.end(), [&](const auto& id) {
    return AdminJson<cclo::v1::ShowCommunicatorResponse>(a, {"comms", "show", id}).size() == 3;
  });
  const auto broken = AdminJson<cclo::v1::ShowCommunicatorResponse>(a, {"comms", "show", trio_id});
  EXPECT_EQ(broken.state(), "broken");
  EXPECT_NE(broken.error().find(lost), std::string::npos) << broken.error();
  EXPECT_EQ(broken.ops_failed(), 1u);
  grpc::Status later = trio0.Run(AllreduceRequest(trio_handles[0], trio_buffers[0], 1024));
  EXPECT_EQ(later.error_code(), grpc::StatusCode::UNAVAILABLE) << later.error_message();
  EXPECT_NE(later.error_message().find(lost), std::string::npos) << later.error_message();

  // 6. The pair still works; the broken trio can be destroyed and a new communicator of
  // the same sessions made and used.
  ExpectPairAllreduce(pair0, pair_handle0, pair1, pair_handle1);
  for (size_t rank = 0; rank < 2; ++rank) {
    cclo::v1::DestroyCommunicatorRequest destroy;
    destroy.set_comm_handle(trio_handles[rank]);
    cclo::v1::DestroyCommunicatorResponse destroyed;
    grpc::Status status =
        trio[rank]->stub().DestroyCommunicator(trio[rank]->Context().get(), destroy, &destroyed);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  ProcessResult gone = Ccloctl(a, {"comms", "show", trio_id});
  EXPECT_EQ(gone.exit_code, 1) << gone.output;
  EXPECT_NE(gone.output.find("no communicator " + trio_id), std::string::npos) << gone.output;
  auto [again0, again1] = JoinPair(trio0, trio1);
  ExpectPairAllreduce(trio0, again0, trio1, again1);

  // 7. No leaks: once the loop's clients are gone, a and b hold only the buffers of the
  // test's own sessions (pair: two of 4 KiB; trio: 1 MiB and one of 4 KiB).
  for (Daemon* daemon : {&a, &b}) {
    cclo::v1::StatusResponse status;
    EXPECT_TRUE(WaitUntil(
        [&] {
          status = AdminJson<cclo::v1::StatusResponse>(*daemon, {"status"});
          return status.sessions() == 2;
        },
        absl::Seconds(20)))
        << status.DebugString();
    EXPECT_EQ(status.buffers(), 4u);
    EXPECT_EQ(status.buffer_bytes(), 3 * 4096 + kTrioCount * 4);
    EXPECT_EQ(status.communicators(), 2u);
  }

  // 8. Both survivors stop cleanly.
  for (Daemon* daemon : {&a, &b}) {
    daemon->process().Signal(SIGTERM);
    ProcessResult stopped = daemon->process().Wait(absl::Seconds(20));
    EXPECT_EQ(stopped.exit_code, 0) << stopped.output.substr(0, 4000);
  }
}

// A peer daemon that hangs (SIGSTOP: its kernel still acknowledges, so TCP sees nothing
// wrong) falls silent on its data sessions: after peer_timeout_ms its ranks are lost, and a
// receive from it fails UNAVAILABLE naming it and why, long before its own deadline. Until
// then heartbeats keep an idle communicator up over several timeouts, though the two
// daemons' timeouts differ: the sessions take the shorter.
TEST(FailureTest, HungPeerDaemonIsLostOnceSilentForThePeerTimeout) {
  Daemon a("peer_timeout_ms: 2000\n"), b("peer_timeout_ms: 60000\n");
  const std::string hung = b.data_address();
  RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  std::this_thread::sleep_for(std::chrono::seconds(5));  // idle for 2.5 peer timeouts
  ExpectPairAllreduce(rank0, handle0, rank1, handle1);

  b.process().Signal(SIGSTOP);
  cclo::v1::SubmitRequest recv = RecvRequest(handle0, rank0.Alloc(4096), 1);
  recv.set_timeout_ms(120'000);
  grpc::Status status = rank0.Run(recv, 120'000);
  b.process().Signal(SIGCONT);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "lost peer daemon " + hung))
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "heartbeat missed: nothing came from peer daemon " + hung +
                                    " within the session's peer timeout of 2s"))
      << status.error_message();
}

// A peer daemon killed while its communicator is idle: the survivor's `ccloctl comms show`
// lists the peer's rank as departed, lost with its daemon, without an op to find out.
TEST(FailureTest, AnIdleCommunicatorShowsAKilledPeersRankAsDeparted) {
  Daemon a;
  auto b = std::make_unique<Daemon>();
  const std::string lost = "lost peer daemon " + b->data_address() + " (rank 1)";
  RawSession rank0(a.runtime_dir()), rank1(b->runtime_dir());
  JoinPair(rank0, rank1);  // the ranks stay idle
  const auto comms = AdminJson<cclo::v1::ListCommunicatorsResponse>(a, {"comms"});
  ASSERT_EQ(comms.communicators_size(), 1);
  const std::string id = comms.communicators(0).comm_id();

  b->process().Signal(SIGKILL);
  EXPECT_EQ(b->process().Wait(absl::Seconds(10)).exit_code, -1);
  cclo::v1::ShowCommunicatorResponse shown;
  EXPECT_TRUE(WaitUntil(
      [&] {
        shown = AdminJson<cclo::v1::ShowCommunicatorResponse>(a, {"comms", "show", id});
        return shown.departed_size() > 0;
      },
      absl::Seconds(20)))
      << shown.DebugString();
  ASSERT_EQ(shown.departed_size(), 1);
  EXPECT_EQ(shown.departed(0).rank(), 1u);
  EXPECT_TRUE(absl::StrContains(shown.departed(0).reason(), lost)) << shown.departed(0).reason();
  EXPECT_EQ(shown.ops_failed(), 0u);
  ProcessResult table = Ccloctl(a, {"comms", "show", id});
  EXPECT_TRUE(absl::StrContains(table.output, lost)) << table.output;
}

// Joins rank `rank` of `size` at root daemon `root` as a peer daemon at `address` would.
void JoinAtRoot(const Daemon& root, const daemon::CommToken& token, uint32_t rank, uint32_t size,
                const std::string& address) {
  std::unique_ptr<cclo::v1::Peer::Stub> stub = cclo::v1::Peer::NewStub(
      grpc::CreateChannel(root.peer_address(), grpc::InsecureChannelCredentials()));
  cclo::v1::PeerJoinRequest request;
  request.set_version(1);
  request.set_selection(firmware::kSelectionVersion);
  request.set_wire_version(hw::poe::kWireVersion);
  request.set_comm_id(std::string(token.id.begin(), token.id.end()));
  request.set_rank(rank);
  request.set_size(size);
  request.set_daemon_address(address);
  request.set_data_address(address);
  request.set_timeout_ms(20'000);
  request.set_proof(daemon::Proof(token.secret, daemon::JoinMessage(request)));
  cclo::v1::PeerJoinResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const grpc::Status status = stub->Join(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// Ranks of a peer daemon that ran their part and left (BYE) while this daemon's join still
// waited for another peer's data sessions: once the communicator is ready here, `ccloctl
// comms show` lists them as departed (the daemon dropped the engine's news of them while
// joining, and listed none).
TEST(FailureTest, RanksThatLeftWhileTheJoinWaitedForAnotherPeerAreShownDeparted) {
  Daemon a("peer_timeout_ms: 600000\n");  // the fake peers send no heartbeats
  RawSession rank1(a.runtime_dir());
  const std::string token = rank1.NewToken();
  absl::StatusOr<daemon::CommToken> parsed = daemon::ParseToken(token);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  // Rank 0 at a fake peer daemon, rank 1 on a, rank 2 at a second fake that comes later.
  std::string first_address, later_address;
  const int first_listener = ListenLoopback(&first_address);
  const int later_listener = ListenLoopback(&later_address);
  ASSERT_GE(first_listener, 0) << std::strerror(errno);
  ASSERT_GE(later_listener, 0) << std::strerror(errno);
  hw::emu::testing::TestComm first;
  first.config.id = parsed->id;
  first.config.secret = parsed->secret;
  first.config.ranks = {{first_address}, {a.data_address()}, {later_address}};
  hw::emu::testing::TestComm later = first;  // a fake announces its comm's rank 0 address
  later.config.ranks[0].data_address = later_address;

  grpc::Status joined;
  std::thread joining([&] { joined = rank1.Join(token, 1, 3); });
  // The fakes' ranks join at the root, a, as their daemons would.
  std::vector<std::thread> fake_joins;
  for (const auto& [rank, address] : {std::pair{0u, first_address}, {2u, later_address}}) {
    fake_joins.emplace_back([&, rank, address] { JoinAtRoot(a, *parsed, rank, 3, address); });
  }
  for (std::thread& fake_join : fake_joins) fake_join.join();

  // The first fake's link comes up; its rank says BYE and it hangs up.
  hw::emu::testing::FakePeer first_peer(a.data_address(), first);
  first_peer.Authenticate(parsed->secret);
  absl::StatusOr<hw::poe::ControlMessage> accept = first_peer.ReadControl();
  ASSERT_TRUE(accept.ok()) << accept.status();
  EXPECT_EQ(accept->kind, hw::poe::ControlKind::kAccept);
  first_peer.Grant(2);
  ASSERT_NO_FATAL_FAILURE(first_peer.AcceptDevice(first_listener));
  ASSERT_TRUE(first_peer.ReadSegment().ok());  // a's grant: this link is up
  first_peer.Bye("rank 0 destroyed the communicator");
  ASSERT_TRUE(first_peer.WaitUntilRead());
  first_peer.Hangup();
  // Then the second fake's link comes up, and the join ends.
  hw::emu::testing::FakePeer later_peer(a.data_address(), later);
  later_peer.Authenticate(parsed->secret);
  accept = later_peer.ReadControl();
  ASSERT_TRUE(accept.ok()) << accept.status();
  EXPECT_EQ(accept->kind, hw::poe::ControlKind::kAccept);
  later_peer.Grant(2);
  ASSERT_NO_FATAL_FAILURE(later_peer.AcceptDevice(later_listener));
  joining.join();
  ASSERT_TRUE(joined.ok()) << joined.error_message();

  const std::string id = hw::CommIdHex(parsed->id);
  const std::string left = absl::StrCat("rank 0 on peer daemon ", first_address,
                                        " left: rank 0 destroyed the communicator");
  const auto shown = AdminJson<cclo::v1::ShowCommunicatorResponse>(a, {"comms", "show", id});
  EXPECT_EQ(shown.state(), "ready");
  ASSERT_EQ(shown.departed_size(), 1) << shown.DebugString();
  EXPECT_EQ(shown.departed(0).rank(), 0u);
  EXPECT_EQ(shown.departed(0).reason(), left);
  ProcessResult table = Ccloctl(a, {"comms", "show", id});
  EXPECT_TRUE(absl::StrContains(table.output, left)) << table.output;
  close(first_listener);
  close(later_listener);
}

// Joins rank 1 of a new communicator on `a`, rank 0 at a fake peer daemon whose link comes
// up and at once sends what no engine may: a's engine breaks the communicator right after
// it answered the join's configuration, maybe before the join marked it ready.
void BreakAsTheDataSessionsComeUp(const Daemon& a, RawSession& rank1) {
  const std::string token = rank1.NewToken();
  absl::StatusOr<daemon::CommToken> parsed = daemon::ParseToken(token);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::string fake_address;
  const int listener = ListenLoopback(&fake_address);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  hw::emu::testing::TestComm comm;
  comm.config.id = parsed->id;
  comm.config.secret = parsed->secret;
  comm.config.ranks = {{fake_address}, {a.data_address()}};
  grpc::Status joined;
  std::thread joining([&] { joined = rank1.Join(token, 1, 2); });
  JoinAtRoot(a, *parsed, 0, 2, fake_address);
  hw::emu::testing::FakePeer peer(a.data_address(), comm);
  peer.Authenticate(parsed->secret);
  absl::StatusOr<hw::poe::ControlMessage> accept = peer.ReadControl();
  EXPECT_TRUE(accept.ok() && accept->kind == hw::poe::ControlKind::kAccept) << accept.status();
  peer.Grant(2);
  peer.AcceptDevice(listener);
  // Behind the ACCEPT that brings the link up, on the same session.
  peer.SendBack(peer.Message(hw::poe::SegmentType::kRendezvousData, 1 << 20),
                std::vector<std::byte>(4096));
  joining.join();
  close(listener);
  char byte;
  while (peer.Read(&byte, 1)) {  // a closes its session once it took the break
  }

  const std::string id = hw::CommIdHex(parsed->id);
  const std::string reason =
      absl::StrCat("invalid data from peer daemon ", fake_address,
                   " (rank 0): rendezvous data segment on the data session this engine sends on");
  if (!joined.ok()) {  // the break came before the join saw the configuration's answer
    EXPECT_EQ(joined.error_message(), absl::StrCat("communicator ", id, " is broken: ", reason));
    return;
  }
  const auto shown = AdminJson<cclo::v1::ShowCommunicatorResponse>(a, {"comms", "show", id});
  EXPECT_EQ(shown.state(), "broken");
  EXPECT_EQ(shown.error(), reason);
}

// The break is not lost while the join ends (it was: `comms show` said ready, as if nothing
// happened, until an op failed). Ten rounds, as the join usually marks it ready first: 8
// runs of 10 failed so.
TEST(FailureTest, ABreakAsTheDataSessionsComeUpIsNotLost) {
  Daemon a("peer_timeout_ms: 600000\n");  // the fake peers send no heartbeats
  RawSession rank1(a.runtime_dir());
  for (int round = 0; round < 10 && !::testing::Test::HasFailure(); ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    BreakAsTheDataSessionsComeUp(a, rank1);
  }
}

// A rank that joins a communicator whose ranks all joined already, as one that left, is
// refused by its daemon, which keeps why that rank left (it recorded 'rank 1 failed to
// join' instead, once the root refused the join of a token all of whose ranks came).
TEST(FailureTest, ALateJoinIsRefusedAndTheDepartedRankKeepsItsReason) {
  Daemon a;
  RawSession rank0(a.runtime_dir()), rank1(a.runtime_dir());
  const std::string token = rank0.NewToken();
  uint64_t handle1 = 0;
  std::thread joining([&] { EXPECT_TRUE(rank1.Join(token, 1, 2, &handle1).ok()); });
  ASSERT_TRUE(rank0.Join(token, 0, 2).ok());
  joining.join();
  const std::string id = hw::CommIdHex(daemon::ParseToken(token)->id);
  ASSERT_TRUE(rank1.Destroy(handle1).ok());
  const std::string left = "rank 1 destroyed the communicator";

  RawSession late(a.runtime_dir());
  grpc::Status joined = late.Join(token, 1, 2);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << joined.error_message();
  EXPECT_EQ(joined.error_message(),
            absl::StrCat("communicator ", id,
                         " is ready here: its 2 ranks joined already, and rank 1 cannot join it "
                         "again"));
  const auto shown = AdminJson<cclo::v1::ShowCommunicatorResponse>(a, {"comms", "show", id});
  EXPECT_EQ(shown.state(), "ready");
  ASSERT_EQ(shown.departed_size(), 1) << shown.DebugString();
  EXPECT_EQ(shown.departed(0).reason(), left);
}

// A rank whose daemon gives up its join at the root (here its client exits; or the root's
// keepalive found the daemon's connection dead) leaves the root's gather: a new client
// joins as that rank and the communicator forms. The root kept it as joined, so the new
// join was refused ('rank 1 of communicator <id> already joined'), and the other ranks,
// once all came, got a table naming a rank no daemon joined and failed at its data session.
TEST(FailureTest, ARankWhoseDaemonGaveUpItsJoinCanJoinAgain) {
  Daemon a, b;
  RawSession rank0(a.runtime_dir()), gone(b.runtime_dir());
  const std::string token = rank0.NewToken();
  grpc::Status given_up;
  std::thread joining([&] { given_up = gone.Join(token, 1, 2); });
  ASSERT_TRUE(a.process().WaitForOutput("joining at this root", absl::Seconds(20)));
  gone.Detach();
  joining.join();
  EXPECT_EQ(given_up.error_code(), grpc::StatusCode::UNAVAILABLE) << given_up.error_message();
  EXPECT_TRUE(a.process().WaitForOutput("rank 1 may join again", absl::Seconds(20)))
      << a.process().Output();

  RawSession rank1(b.runtime_dir());
  uint64_t handle0 = 0, handle1 = 0;
  grpc::Status joined1;
  std::thread again([&] { joined1 = rank1.Join(token, 1, 2, &handle1); });
  grpc::Status joined0 = rank0.Join(token, 0, 2, &handle0);
  again.join();
  ASSERT_TRUE(joined0.ok()) << joined0.error_message();
  ASSERT_TRUE(joined1.ok()) << joined1.error_message();
  ExpectPairAllreduce(rank0, handle0, rank1, handle1);
}

// A daemon whose rank waits at a root and that then falls silent without closing its
// connection (its host crashed or went off the network; here it hangs: SIGSTOP keeps its
// kernel answering TCP) does not hold a descriptor at the root for good: the root's Peer
// port pings its connections and closes the one that does not answer.
TEST(FailureTest, ARootClosesThePeerConnectionOfADaemonThatFellSilent) {
  Daemon a, b;
  FootprintProbe probe(a);
  {
    // A join served first: the Peer service keeps idle as many threads as it once served.
    RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir());
    JoinPair(rank0, rank1);
  }
  RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir());
  const std::string token = rank0.NewToken();
  absl::StatusOr<Footprint> steady = probe.Steady();
  ASSERT_TRUE(steady.ok()) << steady.status();
  // Rank 1 waits at the root for rank 0, which never joins, until its 20 s pass, over b's
  // connection to a's Peer port.
  std::thread waiting([&] { (void)rank1.Join(token, 1, 2); });
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Footprint> now = probe.Measure();
        return now.ok() && now->fds["socket"] == steady->fds["socket"] + 1;
      },
      absl::Seconds(10)));

  b.process().Signal(SIGSTOP);
  const Footprint settled = probe.SettleAt(*steady, absl::Minutes(2));
  b.process().Signal(SIGCONT);
  waiting.join();
  EXPECT_EQ(settled, *steady) << settled;
}

TEST(FailureTest, OpThatCannotCompleteEndsAtItsDeadline) {
  Daemon a, b;
  RawSession rank0(a.runtime_dir());
  RawSession rank1(b.runtime_dir());
  auto [handle0, handle1] = JoinPair(rank0, rank1);
  cclo::v1::SubmitRequest request = RecvRequest(handle0, rank0.Alloc(4096), 1);
  request.set_timeout_ms(300);  // rank 1 never sends
  grpc::Status status = rank0.Run(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  // The error, and the daemon's line about the broken communicator, say what it waited for.
  const std::string waited =
      "0 of 1 moves done; move 0: receive from rank 1 (tag 7, message 0): "
      "nothing arrived";
  EXPECT_TRUE(absl::EndsWith(status.error_message(), waited)) << status.error_message();
  EXPECT_TRUE(
      a.process().WaitForOutput("; calls running: recv on rank 0: " + waited, absl::Seconds(10)))
      << a.process().Output();
  grpc::Status later = rank0.Run(RecvRequest(handle0, rank0.Alloc(4096), 1));
  EXPECT_EQ(later.error_code(), grpc::StatusCode::UNAVAILABLE) << later.error_message();
  EXPECT_NE(later.error_message().find("broken"), std::string::npos) << later.error_message();
}

TEST(FailureTest, StoppingDaemonEndsAPendingJoinAtOnce) {
  auto daemon = std::make_unique<Daemon>();
  RawSession rank0(daemon->runtime_dir());
  grpc::Status joined;
  std::thread join([&] { joined = rank0.Join(rank0.NewToken(), 0, 2); });  // rank 1 never comes
  ASSERT_TRUE(daemon->process().WaitForOutput("joining at this root", absl::Seconds(20)));
  daemon->process().Signal(SIGTERM);
  ProcessResult stopped = daemon->process().Wait(absl::Seconds(30));
  join.join();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_NE(joined.error_message().find("shutting down"), std::string::npos)
      << joined.error_message();
}

// A daemon that stops while its rank waits at another daemon, the root, says that it is
// the one stopping (the join's error said "join at root daemon A failed: this daemon is
// shutting down", which reads as if A stopped).
TEST(FailureTest, StoppingDaemonEndsItsRanksJoinAtAnotherRootNamingItself) {
  Daemon root;
  auto daemon = std::make_unique<Daemon>();
  RawSession rank0(daemon->runtime_dir());
  const std::string token = RawSession(root.runtime_dir()).NewToken();
  grpc::Status joined;
  std::thread join([&] { joined = rank0.Join(token, 0, 2); });  // rank 1 never comes
  ASSERT_TRUE(root.process().WaitForOutput("joining at this root", absl::Seconds(20)));
  daemon->process().Signal(SIGTERM);
  ProcessResult stopped = daemon->process().Wait(absl::Seconds(30));
  join.join();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_EQ(joined.error_message(), "this daemon is shutting down");
}

// The end of a daemon's output, where what just happened is (its start is debug lines).
std::string Tail(const std::string& output) {
  return output.size() > 4000 ? output.substr(output.size() - 4000) : output;
}

// The times of the daemon's log lines (spdlog: "[2026-11-24 16:27:29.640] ...") that hold
// `text`.
std::vector<absl::Time> LogTimes(const std::string& output, const std::string& text) {
  std::vector<absl::Time> times;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    absl::Time time;
    if (absl::StrContains(line, text) && line.size() > 24 &&
        absl::ParseTime("%Y-%m-%d %H:%M:%E3S", line.substr(1, 23), &time, nullptr)) {
      times.push_back(time);
    }
  }
  return times;
}

// A daemon started with a soft descriptor limit below its hard one (the default of 1024
// and more) raises the soft one: sessions, buffers, rings and data sessions all hold some.
TEST(FailureTest, RaisesItsDescriptorLimitToTheHardOne) {
  Daemon a("", {"/usr/bin/prlimit", "--nofile=64:4096"});
  std::ifstream limits(absl::StrCat("/proc/", a.process().pid(), "/limits"));
  std::string line;
  while (std::getline(limits, line) && !absl::StartsWith(line, "Max open files")) {
  }
  const std::vector<std::string> fields =
      absl::StrSplit(line, ' ', absl::SkipEmpty());  // Max open files SOFT HARD files
  ASSERT_EQ(fields.size(), 6u) << line;
  EXPECT_EQ(fields[3], "4096") << line;
  EXPECT_EQ(fields[4], "4096") << line;
  EXPECT_TRUE(
      a.process().WaitForOutput("open descriptor limit raised from 64 to 4096", absl::Seconds(20)))
      << Tail(a.process().Output());
}

/// How many lines of `output` hold both `where` and `what`.
size_t LinesWith(const std::string& output, const std::string& where, const std::string& what) {
  size_t count = 0;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    count += absl::StrContains(line, where) && absl::StrContains(line, what);
  }
  return count;
}

/// Whether the daemon's status counts as many pauses in accepting on each socket as its log
/// has lines for them, once they agree (a line is logged before its pause is counted), and
/// its metrics as many as its status.
void ExpectPausesAsLogged(Daemon& daemon) {
  cclo::v1::StatusResponse status;
  std::map<std::string, std::pair<uint64_t, size_t>> counts;  // socket: counted, logged
  auto agree = [&] {
    status = AdminJson<cclo::v1::StatusResponse>(daemon, {"status"});
    const std::string output = daemon.process().Output();
    counts = {
        {"data",
         {status.accept_pauses_data(), LinesWith(output, "", "not accepting data sessions for")}},
        {"attach",
         {status.accept_pauses_attach(), LinesWith(output, "", "not accepting clients for")}},
        {"client",
         {status.accept_pauses_client(),
          LinesWith(output, "client.sock: ", "; not accepting for")}},
        {"admin",
         {status.accept_pauses_admin(), LinesWith(output, "admin.sock: ", "; not accepting for")}},
        {"peer",
         {status.accept_pauses_peer(), LinesWith(output, "peer port ", "; not accepting for")}}};
    return std::all_of(counts.begin(), counts.end(), [](const auto& socket) {
      return socket.second.first == socket.second.second;
    });
  };
  EXPECT_TRUE(WaitUntil(agree, absl::Seconds(10)));
  const std::string exposition = Scrape(daemon);
  for (const auto& [socket, count] : counts) {
    EXPECT_EQ(count.first, count.second) << socket << ": counted, and logged";
    EXPECT_TRUE(absl::StrContains(exposition, absl::StrCat("cclod_accept_pauses_total{socket=\"",
                                                           socket, "\"} ", count.first, "\n")))
        << socket << "\n"
        << exposition;
  }
}

// Whether process `pid` holds more than 60 descriptors, or they cannot be counted: a daemon
// under --nofile=80 before the connections that took its descriptors are closed.
bool HoldsMostDescriptors(pid_t pid) {
  const absl::StatusOr<uint64_t> fds = hw::OpenDescriptors(pid);
  return !fds.ok() || *fds > 60;
}

TEST(FailureTest, OutOfDescriptorsPausesAcceptingAndRecovers) {
  Daemon a("", {"/usr/bin/prlimit", "--nofile=80"});
  Daemon b;
  // Hold more connections to a's data port than a has descriptors left.
  std::vector<int> flood;
  for (int i = 0; i < 120; ++i) {
    const int fd = ConnectLoopback(absl::StrCat("127.0.0.1:", a.data_port()));
    if (fd < 0) break;
    flood.push_back(fd);
  }
  EXPECT_TRUE(a.process().WaitForOutput("not accepting data sessions", absl::Seconds(20)))
      << Tail(a.process().Output());
  // Clients attaching now queue, and the attach server backs off instead of spinning on
  // the failing accept (a spinning one logged over 100,000 failures a second): its
  // "not accepting clients" lines come at least the backoff apart.
  std::vector<int> attaching;
  for (int i = 0; i < 5; ++i) {
    attaching.push_back(ConnectUnix(a.runtime_dir() + "/attach.sock"));
    ASSERT_GE(attaching.back(), 0) << std::strerror(errno);
  }
  std::vector<absl::Time> pauses;
  const absl::Time enough = absl::Now() + absl::Seconds(20);
  while ((pauses = LogTimes(a.process().Output(), "not accepting clients for")).size() < 3 &&
         absl::Now() < enough) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GE(pauses.size(), 3u) << Tail(a.process().Output());
  EXPECT_GE(pauses[1] - pauses[0], absl::Milliseconds(90));
  EXPECT_GE(pauses[2] - pauses[1], absl::Milliseconds(90));
  for (int fd : attaching) close(fd);
  for (int fd : flood) close(fd);

  // Once the flood is gone (the queued rest of it accepted and closed too), a works with
  // other daemons again. The queue first: once empty it stays so (the flood has closed),
  // and from then on a's descriptors only fall.
  auto held = [&a] { return HoldsMostDescriptors(a.process().pid()); };
  const absl::Time recovered = absl::Now() + absl::Seconds(20);
  while ((UnreadAt(a.data_port()) != 0 || held()) && absl::Now() < recovered) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(UnreadAt(a.data_port()), 0) << "a's data port: flood queued, or no listener";
  ASSERT_FALSE(held()) << hw::OpenDescriptors(a.process().pid()).value_or(0)
                       << " descriptors held by a";
  ExpectPausesAsLogged(a);
  RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir());
  auto [h0, h1] = JoinPair(rank0, rank1);
  ExpectPairAllreduce(rank0, h0, rank1, h1);
}

// The attach server goes on when polling fails for a while: with the descriptor limit lowered
// at run time (prlimit --pid) below the entries it polls, poll fails (EINVAL), which ended its
// thread, so no client attached again until cclod restarted. It pauses as for a failed
// accept, and a client that connected meanwhile attaches once the limit is back.
TEST(FailureTest, AttachServerPollsAgainAfterTheLimitWasLoweredBelowItsEntries) {
  Daemon a;
  std::vector<std::unique_ptr<RawSession>> sessions;
  for (int i = 0; i < 3; ++i) sessions.push_back(std::make_unique<RawSession>(a.runtime_dir()));
  rlimit limit{};
  ASSERT_EQ(prlimit(a.process().pid(), RLIMIT_NOFILE, nullptr, &limit), 0) << std::strerror(errno);
  const rlimit lowered{.rlim_cur = 4, .rlim_max = limit.rlim_max};
  ASSERT_EQ(prlimit(a.process().pid(), RLIMIT_NOFILE, &lowered, nullptr), 0)
      << std::strerror(errno);
  // Its connection wakes the attach server, whose accept fails (the daemon holds more than 4
  // descriptors); then the poll of 5 entries does.
  std::unique_ptr<RawSession> late;
  std::thread attach([&] { late = std::make_unique<RawSession>(a.runtime_dir()); });
  const bool failed = a.process().WaitForOutput(
      "attach server poll failed: Invalid argument; not accepting clients for 100ms",
      absl::Seconds(5));
  ASSERT_EQ(prlimit(a.process().pid(), RLIMIT_NOFILE, &limit, nullptr), 0) << std::strerror(errno);
  attach.join();
  ASSERT_TRUE(failed) << Tail(a.process().Output());
  EXPECT_GT(late->Alloc(4096), 0u);
  ExpectPausesAsLogged(a);
}

// client.sock and admin.sock serve again once the connections that took all of the daemon's
// descriptors close: gRPC's own listener stopped accepting on a socket for good when an
// accept failed for want of descriptors, so any local user could leave the daemon unable to
// take a new client or ccloctl until it restarted.
TEST(FailureTest, LocalGrpcSocketsServeAgainAfterRunningOutOfDescriptors) {
  Daemon a("", {"/usr/bin/prlimit", "--nofile=80"});
  for (const char* socket : {"client.sock", "admin.sock"}) {
    const std::string pause = absl::StrCat(socket, ": accept failed: Too many open files");
    const size_t failed = Occurrences(a.process().Output(), pause);
    std::vector<int> flood;
    for (int i = 0; i < 80; ++i) {
      flood.push_back(ConnectUnix(absl::StrCat(a.runtime_dir(), "/", socket)));
      ASSERT_GE(flood.back(), 0) << socket << ": " << std::strerror(errno);
    }
    EXPECT_TRUE(WaitUntil([&] { return Occurrences(a.process().Output(), pause) > failed; },
                          absl::Seconds(20)))
        << socket << ": no accept failed\n"
        << Tail(a.process().Output());
    for (int fd : flood) close(fd);
  }
  // A call without a session is refused by the server, so the server got it.
  std::unique_ptr<v1::Client::Stub> client = v1::Client::NewStub(grpc::CreateChannel(
      absl::StrCat("unix:", a.runtime_dir(), "/client.sock"), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  context.set_wait_for_ready(true);
  v1::CreateCommunicatorIdResponse response;
  const grpc::Status refused =
      client->CreateCommunicatorId(&context, v1::CreateCommunicatorIdRequest(), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
  const ProcessResult status = Ccloctl(a, {"status"});
  EXPECT_EQ(status.exit_code, 0) << status.output;
  ExpectPausesAsLogged(a);
}

// Whether a server takes a connection to plaintext gRPC port `address` within 5 s: it sends
// its HTTP/2 SETTINGS frame first; a listener that no longer accepts sends nothing.
bool GrpcServerAnswers(const std::string& address) {
  const int fd = ConnectLoopback(address);
  if (fd < 0) return false;
  pollfd readable{.fd = fd, .events = POLLIN, .revents = 0};
  char byte = 0;
  const bool answered = poll(&readable, 1, 5000) == 1 && read(fd, &byte, 1) == 1;
  close(fd);
  return answered;
}

// The peer port serves again once the connections that took all of the daemon's descriptors
// close: gRPC 1.51's own listener stops accepting for good when an accept fails for want of
// descriptors (it logs 'Failed accept4: Too many open files' once), which left the daemon
// unable to root a communicator until it restarted. cclod starts another server on the port,
// each try while still out of descriptors a pause logged and counted, and then every
// connection reaches a server (none the stopped listener, which shared the port). A join the
// stopped server took before goes on and ends once its gather does. A connection made while
// none accepted waited in the stopped listener's queue, which its close resets: a daemon's
// join tries again, logged and counted, and joins (it failed with the reset before), while
// a bare gRPC client's call fails (UNAVAILABLE, reset).
TEST(FailureTest, PeerPortServesAgainAfterRunningOutOfDescriptors) {
  Daemon a("", {"/usr/bin/prlimit", "--nofile=80"});
  Daemon b;
  EXPECT_EQ(ForeignPeerJoin(a.peer_address(), "10.0.0.9:1").error_code(),
            grpc::StatusCode::NOT_FOUND);
  RawSession rank0(a.runtime_dir()), rank1(b.runtime_dir()), queued1(b.runtime_dir());
  const std::string token = rank0.NewToken();
  const std::string queued_token = rank0.NewToken();
  uint64_t h1 = 0;
  grpc::Status joined1;
  // Joined at any exit (an ASSERT's too), within its join timeout, which leaves room for
  // the flood and the recovery on a loaded machine.
  std::jthread join1([&] { joined1 = rank1.Join(token, 1, 2, &h1, 60'000); });
  ASSERT_TRUE(a.process().WaitForOutput("joining at this root", absl::Seconds(20)));
  std::vector<int> flood;
  for (int i = 0; i < 80; ++i) {
    flood.push_back(ConnectLoopback(a.peer_address()));
    ASSERT_GE(flood.back(), 0) << std::strerror(errno);
  }
  const std::string stopped =
      absl::StrCat("peer port ", a.peer_address(), ": accept failed: Too many open files");
  EXPECT_TRUE(a.process().WaitForOutput(stopped, absl::Seconds(20))) << Tail(a.process().Output());
  // Tries to serve again while the flood holds the descriptors fail, each a pause.
  const std::string again = absl::StrCat("peer port ", a.peer_address(), ": cannot serve it again");
  EXPECT_TRUE(a.process().WaitForOutput(again, absl::Seconds(20))) << Tail(a.process().Output());
  // A join that connects meanwhile waits in the stopped listener's queue, which its close
  // resets once another server serves.
  const uint16_t port = static_cast<uint16_t>(
      std::atoi(a.peer_address().substr(a.peer_address().rfind(':') + 1).c_str()));
  const int64_t queued = UnreadAt(port);
  grpc::Status reset;
  std::jthread join_reset([&] { reset = ForeignPeerJoin(a.peer_address(), "10.0.0.9:1"); });
  uint64_t queued_h1 = 0;
  grpc::Status queued_joined1;
  std::jthread join_queued(
      [&] { queued_joined1 = queued1.Join(queued_token, 1, 2, &queued_h1, 60'000); });
  EXPECT_TRUE(WaitUntil([&] { return UnreadAt(port) >= queued + 2; }, absl::Seconds(20)))
      << UnreadAt(port) << " connections queued, " << queued << " before the joins";
  for (int fd : flood) close(fd);
  EXPECT_TRUE(a.process().WaitForOutput(
      absl::StrCat("peer port ", a.peer_address(), ": serving again"), absl::Seconds(20)))
      << Tail(a.process().Output());
  join_reset.join();
  EXPECT_EQ(reset.error_code(), grpc::StatusCode::UNAVAILABLE) << reset.error_message();
  EXPECT_TRUE(absl::StrContains(reset.error_message(), "Connection reset by peer"))
      << reset.error_message();
  auto held = [&a] { return HoldsMostDescriptors(a.process().pid()); };
  const absl::Time closed = absl::Now() + absl::Seconds(20);
  while (held() && absl::Now() < closed) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_FALSE(held()) << hw::OpenDescriptors(a.process().pid()).value_or(0)
                       << " descriptors held by a";
  // The stopped listener is gone once gRPC let go of it (its shutdown runs meanwhile).
  ASSERT_TRUE(WaitUntil([&] { return ListeningAt(port) == 1; }, absl::Seconds(20)))
      << ListeningAt(port) << " sockets listen at " << a.peer_address();
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(GrpcServerAnswers(a.peer_address())) << "connection " << i;
  }
  const grpc::Status refused = ForeignPeerJoin(a.peer_address(), "10.0.0.9:1");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND) << refused.error_message();
  uint64_t h0 = 0;
  const grpc::Status joined0 = rank0.Join(token, 0, 2, &h0);
  join1.join();
  ASSERT_TRUE(joined0.ok()) << joined0.error_message();
  ASSERT_TRUE(joined1.ok()) << joined1.error_message();
  ExpectPairAllreduce(rank0, h0, rank1, h1);
  uint64_t queued_h0 = 0;
  const grpc::Status queued_joined0 = rank0.Join(queued_token, 0, 2, &queued_h0);
  join_queued.join();
  ASSERT_TRUE(queued_joined0.ok()) << queued_joined0.error_message();
  ASSERT_TRUE(queued_joined1.ok()) << queued_joined1.error_message();
  ExpectPairAllreduce(rank0, queued_h0, queued1, queued_h1);
  ExpectPausesAsLogged(a);
  EXPECT_GE(AdminJson<cclo::v1::StatusResponse>(a, {"status"}).accept_pauses_peer(), 2u);
  // b's tries again, each logged and counted (the log line comes before the next try).
  const uint64_t retries = AdminJson<cclo::v1::StatusResponse>(b, {"status"}).join_retries();
  EXPECT_GE(retries, 1u);
  EXPECT_EQ(retries, LinesWith(b.process().Output(),
                               absl::StrCat("join at root daemon ", a.peer_address(),
                                            ": the root reset the connection ("),
                               "; trying again in "));
  const std::string exposition = Scrape(b);
  EXPECT_TRUE(
      absl::StrContains(exposition, absl::StrCat("cclod_join_retries_total ", retries, "\n")))
      << exposition;
}

// How many tasks (threads of every process) user `uid` has: what RLIMIT_NPROC counts.
int TasksOf(uid_t uid) {
  int tasks = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream status(entry.path() / "status");
    int owner = -1;
    int threads = 0;
    for (std::string line; std::getline(status, line);) {
      if (absl::StartsWith(line, "Uid:")) owner = std::atoi(line.c_str() + 4);
      if (absl::StartsWith(line, "Threads:")) threads = std::atoi(line.c_str() + 8);
    }
    if (owner == static_cast<int>(uid)) tasks += threads;
  }
  return tasks;
}

// A Daemon launcher that runs cclod as user `uid` under a process limit of `limit` tasks: a
// user of its own, as RLIMIT_NPROC counts every task of the user. The daemon runs from a copy
// in the harness's dir (the user may not reach the runfiles), which becomes the user's, as the
// dir the daemon makes its runtime dir in must.
std::vector<std::string> AsUserWithTasks(uid_t uid, int limit) {
  EXPECT_EQ(TasksOf(uid), 0) << "uid " << uid << " is in use (another run of this test?)";
  return {
      "/bin/sh", "-c",
      absl::StrCat("dir=$(dirname \"$3\") && cp \"$1\" \"$dir/cclod\" && chown ", uid,
                   " \"$dir\" && shift && exec /usr/bin/setpriv --reuid=", uid, " --regid=", uid,
                   " --clear-groups /usr/bin/prlimit --nproc=", limit, " \"$dir/cclod\" \"$@\""),
      "sh"};
}

// Processes of user `uid` that take what its tasks leave of `limit`, there once it returns.
std::vector<std::unique_ptr<Process>> TakeTasksUpTo(uid_t uid, int limit) {
  std::vector<std::unique_ptr<Process>> fillers;
  for (int i = TasksOf(uid); i < limit; ++i) {
    fillers.push_back(std::make_unique<Process>(std::vector<std::string>{
        "/usr/bin/setpriv", absl::StrCat("--reuid=", uid), absl::StrCat("--regid=", uid),
        "--clear-groups", "/bin/sleep", "60"}));
  }
  EXPECT_TRUE(WaitUntil([&] { return TasksOf(uid) >= limit; }, absl::Seconds(10)))
      << TasksOf(uid) << " tasks of uid " << uid << ", not " << limit;
  return fillers;
}

// A daemon that can start no thread (its user at its process limit) stops cleanly on
// SIGTERM: stopping the metrics server started one, and its failure aborted the daemon
// ('terminate called without an active exception') before it told its peers or ended its
// sessions.
TEST(FailureTest, StopsCleanlyWhenNoThreadCanStart) {
  constexpr uid_t kDaemonUid = 65530;
  constexpr int kLimit = 64;
  Daemon daemon("", AsUserWithTasks(kDaemonUid, kLimit));
  const std::vector<std::unique_ptr<Process>> fillers = TakeTasksUpTo(kDaemonUid, kLimit);
  daemon.process().Signal(SIGTERM);
  const ProcessResult stopped = daemon.process().Wait(absl::Seconds(30));
  EXPECT_EQ(stopped.exit_code, 0) << Tail(stopped.output);
  EXPECT_TRUE(absl::StrContains(stopped.output, "cclod stopped")) << Tail(stopped.output);
}

// A daemon in which gRPC could not start a thread while it ran stops on SIGTERM. gRPC 1.51
// starts a timer thread as a timer fires while no other waits, goes on without it at its
// user's process limit but counts it, and its shutdown, as the daemon's last server went,
// waited for it for good after 'received signal 15; shutting down' (under systemd, a SIGKILL
// after TimeoutStopSec and a stop reported failed). An idle daemon has one timer thread and
// no timer fired yet; a join that dials its root fires one.
TEST(FailureTest, StopsOnceGrpcCouldNotStartAThread) {
  constexpr uid_t kDaemonUid = 65532;
  // gRPC loses the 40-byte record of the timer thread it could not start (the thread frees
  // it): a leak of gRPC's, which LeakSanitizer reports at this daemon's end only.
  std::vector<std::string> launcher = AsUserWithTasks(kDaemonUid, 4096);
  launcher.insert(launcher.begin(), {"/usr/bin/env", "LSAN_OPTIONS=detect_leaks=0"});
  Daemon daemon("", launcher);
  std::string silent;
  const int listener = ListenLoopback(&silent);  // a root that accepts nothing
  ASSERT_GE(listener, 0);
  RawSession rank0(daemon.runtime_dir());
  // A call served leaves client.sock's server a second thread waiting for calls, which serves
  // the join at the limit (with one, it would answer 'Server Threadpool Exhausted').
  const std::string token = daemon::FormatToken(daemon::NewToken(silent));
  rank0.NewToken();
  // The daemon's user at its limit from here on, whatever the daemon's threads on this host
  // (set as that user, who may lower its own process's limit).
  const std::string tasks = absl::StrCat("--nproc=", TasksOf(kDaemonUid));
  const ProcessResult limited =
      Process({"/usr/bin/setpriv", absl::StrCat("--reuid=", kDaemonUid),
               absl::StrCat("--regid=", kDaemonUid), "--clear-groups", "/usr/bin/prlimit",
               absl::StrCat("--pid=", daemon.process().pid()), tasks})
          .Wait(absl::Seconds(10));
  ASSERT_EQ(limited.exit_code, 0) << limited.output;
  const grpc::Status joined = rank0.Join(token, 0, 2, nullptr, 1000);
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::UNAVAILABLE) << joined.error_message();
  EXPECT_TRUE(absl::StrContains(joined.error_message(), "no answer within the join timeout"))
      << joined.error_message();
  // Its connection to the root, which kept gRPC from shutting down, ends with the listener.
  close(listener);
  daemon.process().Signal(SIGTERM);
  const ProcessResult stopped = daemon.process().Wait(absl::Seconds(30));
  EXPECT_EQ(stopped.exit_code, 0) << Tail(stopped.output);
  EXPECT_TRUE(absl::StrContains(stopped.output, "received signal 15; shutting down"))
      << Tail(stopped.output);
  EXPECT_TRUE(absl::EndsWith(stopped.output, "cclod stopped\n")) << Tail(stopped.output);
}

// A daemon that cannot have the threads it starts with (its user at its process limit) fails
// its start as one that may pass later: exit code 1, which the unit retries, with the reason,
// and no socket left behind. Wherever the limit fell it aborted (exit code 134: std::thread's
// std::system_error, or gRPC's 'assertion failed: worker->created()'), leaving client.sock or
// admin.sock, or failed with civetweb's 'null context'. With just the threads it says it
// takes (and the main one), it starts and answers: a count short of what gRPC takes (more
// of them on more CPUs, or in a later gRPC) fails here.
TEST(FailureTest, AStartWithoutThreadsFailsCleanlyAndALaterOnePasses) {
  // A user of its own, as AsUserWithTasks has it, with a copy of the daemon.
  constexpr uid_t kDaemonUid = 65531;
  ASSERT_EQ(TasksOf(kDaemonUid), 0) << "uid " << kDaemonUid << " is in use (another run?)";
  char dir_template[] = "/tmp/cclo.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  ASSERT_EQ(chown(dir.c_str(), kDaemonUid, kDaemonUid), 0) << std::strerror(errno);
  std::filesystem::copy_file(Runfile("daemon/cclod"), dir + "/cclod");
  const std::string config = dir + "/cclod.yaml";
  std::ofstream(config) << "runtime_dir: " << dir << "/run\nhost: 127.0.0.1\n"
                        << "peer_port: 0\ndata_port: 0\nmetrics_port: 0\n";
  const std::vector<std::string> as_user = {"/usr/bin/setpriv",
                                            absl::StrCat("--reuid=", kDaemonUid),
                                            absl::StrCat("--regid=", kDaemonUid), "--clear-groups"};
  // Limits at which, before, the data port's thread (2), the peer client's (5), gRPC's
  // first server (8), client.sock's (13), admin.sock's (15) and civetweb (17) had none.
  int takes = 0;
  for (int limit : {2, 5, 8, 13, 15, 17}) {
    std::vector<std::string> command = as_user;
    command.insert(command.end(), {"/usr/bin/prlimit", absl::StrCat("--nproc=", limit),
                                   dir + "/cclod", "--config", config});
    const ProcessResult refused = Process(command).Wait(absl::Seconds(30));
    EXPECT_EQ(refused.exit_code, 1) << "--nproc=" << limit << "\n" << Tail(refused.output);
    EXPECT_TRUE(absl::StrContains(refused.output,
                                  "cclod cannot start: cannot start a thread for the start"))
        << "--nproc=" << limit << "\n"
        << Tail(refused.output);
    for (const char* socket : {"attach.sock", "client.sock", "admin.sock"}) {
      EXPECT_FALSE(std::filesystem::exists(absl::StrCat(dir, "/run/", socket)))
          << "--nproc=" << limit << " left " << socket;
    }
    std::smatch said;
    const std::regex kTakes("which takes ([0-9]+);");
    if (std::regex_search(refused.output, said, kTakes)) takes = std::stoi(said[1]);
  }
  ASSERT_GT(takes, 17);
  // Its threads and the main one (and one ThreadSanitizer may start of its own).
#ifdef __SANITIZE_THREAD__
  constexpr int kSanitizerThreads = 1;
#else
  constexpr int kSanitizerThreads = 0;
#endif
  std::vector<std::string> command = as_user;
  command.insert(command.end(),
                 {"/usr/bin/prlimit", absl::StrCat("--nproc=", takes + 1 + kSanitizerThreads),
                  dir + "/cclod", "--config", config});
  Process lifted(command);
  EXPECT_TRUE(lifted.WaitForOutput("ready: peer", absl::Seconds(30))) << Tail(lifted.Output());
  const ProcessResult status =
      Process({Runfile("client/ccloctl"), "--runtime-dir", dir + "/run", "status"})
          .Wait(absl::Seconds(30));
  EXPECT_EQ(status.exit_code, 0) << status.output << Tail(lifted.Output());
  lifted.Signal(SIGTERM);
  EXPECT_EQ(lifted.Wait(absl::Seconds(30)).exit_code, 0) << Tail(lifted.Output());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cclo::testing
