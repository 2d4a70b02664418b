#include "daemon/attach_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cclo/v1/attach.h"
#include "cclo/v1/ring.h"
#include "daemon/session_ring.h"
#include "hw/clock.h"
#include "hw/process.h"
#include "tests/fuzz/mutator.h"

namespace cclo::daemon {
namespace {

class AttachServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/cclo.XXXXXX";
    dir_ = mkdtemp(dir);
    path_ = dir_ + "/attach.sock";
    Serve(Config{});
  }

  /// (Re)starts the server with the tenants of `config`.
  void Serve(const Config& config) {
    server_.reset();
    tenants_ = std::make_unique<TenantStore>(config);
    absl::StatusOr<std::unique_ptr<AttachServer>> server = AttachServer::Start(
        path_, tenants_.get(), &sessions_,
        [this](const SessionPtr& session) {
          absl::MutexLock lock(&mu_);
          ended_.push_back(session->id());
        },
        [this] {
          absl::MutexLock lock(&mu_);
          return admission_;
        },
        [this](const SessionPtr&) -> absl::StatusOr<std::vector<int>> {
          absl::MutexLock lock(&mu_);
          if (!rings_failure_.ok()) return rings_failure_;
          absl::StatusOr<std::unique_ptr<SessionRing>> ring = SessionRing::Create();
          if (!ring.ok()) return ring.status();
          rings_.push_back(*std::move(ring));
          return rings_.back()->ClientFds();
        },
        [] {});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  int Connect() {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strcpy(address.sun_path, path_.c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    return fd;
  }

  /// Sends HELLO and reads the answer, with the descriptors it carries.
  static absl::StatusOr<attach::Received> SayHello(int fd) {
    if (absl::Status sent = attach::SendFrame(fd, {attach::FrameType::kHello, 0, 0, ""});
        !sent.ok()) {
      return sent;
    }
    return attach::ReceiveFrame(fd, hw::SteadyNow() + absl::Seconds(10));
  }

  /// HELLO and the answer to it.
  attach::Frame Hello(int fd) {
    absl::StatusOr<attach::Received> answer = SayHello(fd);
    EXPECT_TRUE(answer.ok()) << answer.status();
    return answer.ok() ? answer->frame : attach::Frame{};
  }

  /// A new caller is refused with `code` and `text`, and no session stays.
  void ExpectRefused(absl::StatusCode code, const std::string& text) {
    int fd = Connect();
    attach::Frame refused = Hello(fd);
    EXPECT_EQ(refused.type, attach::FrameType::kRefused);
    EXPECT_EQ(refused.id, static_cast<uint64_t>(code));
    EXPECT_EQ(refused.text, text);
    close(fd);
    EXPECT_TRUE(sessions_.All().empty());
  }

  std::string dir_, path_;
  std::unique_ptr<TenantStore> tenants_;
  SessionRegistry sessions_;
  std::unique_ptr<AttachServer> server_;
  absl::Mutex mu_;
  std::vector<uint64_t> ended_ ABSL_GUARDED_BY(mu_);
  /// The rings made for the sessions.
  std::vector<std::unique_ptr<SessionRing>> rings_ ABSL_GUARDED_BY(mu_);
  /// What the server's admit function answers.
  absl::Status admission_ ABSL_GUARDED_BY(mu_);
  /// Not OK: the server's open_rings fails with it (as when out of descriptors).
  absl::Status rings_failure_ ABSL_GUARDED_BY(mu_);
};

TEST_F(AttachServerTest, HelloGetsSessionWithPeerCredentials) {
  int fd = Connect();
  absl::StatusOr<attach::Received> welcome = SayHello(fd);
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  EXPECT_EQ(welcome->frame.type, attach::FrameType::kWelcome);
  EXPECT_EQ(welcome->frame.text.size(), 64u);
  absl::StatusOr<SessionPtr> session = sessions_.FindByToken(welcome->frame.text);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->id(), welcome->frame.id);
  EXPECT_EQ((*session)->credentials().pid, getpid());
  EXPECT_EQ((*session)->credentials().uid, getuid());
  close(fd);
}

TEST_F(AttachServerTest, WelcomeCarriesTheRingsAndTheirDoorbells) {
  int fd = Connect();
  absl::StatusOr<attach::Received> welcome = SayHello(fd);
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  EXPECT_EQ(welcome->frame.type, attach::FrameType::kWelcome);
  EXPECT_EQ(welcome->frame.bytes, ring::kRingBytes);
  ASSERT_GE(welcome->fd, 0);
  ASSERT_EQ(welcome->more_fds.size(), 2u);
  struct stat info {};
  ASSERT_EQ(fstat(welcome->fd, &info), 0);
  EXPECT_EQ(static_cast<uint64_t>(info.st_size), ring::kRingBytes);
  // Sealed: the client cannot shrink the daemon's mapping under it.
  EXPECT_NE(ftruncate(welcome->fd, 4096), 0);
  void* base = mmap(nullptr, ring::kRingBytes, PROT_READ, MAP_SHARED, welcome->fd, 0);
  ASSERT_NE(base, MAP_FAILED);
  EXPECT_EQ(ring::Header(base)->magic, ring::kMagic);
  EXPECT_EQ(ring::Header(base)->version, ring::kVersion);
  EXPECT_EQ(ring::Header(base)->command_slots, ring::kCommandSlots);
  munmap(base, ring::kRingBytes);
  auto kind = [](int fd) {
    return std::filesystem::read_symlink(absl::StrCat("/proc/self/fd/", fd)).string();
  };
  // The command doorbell is an eventfd; the completion doorbell the read end of a pipe,
  // which the client cannot write.
  EXPECT_EQ(kind(welcome->more_fds[0]), "anon_inode:[eventfd]");
  EXPECT_TRUE(absl::StartsWith(kind(welcome->more_fds[1]), "pipe:")) << kind(welcome->more_fds[1]);
  const char ring = 1;
  EXPECT_LT(write(welcome->more_fds[1], &ring, sizeof(ring)), 0);
  for (int doorbell : welcome->more_fds) close(doorbell);
  close(welcome->fd);
  close(fd);
}

TEST_F(AttachServerTest, CallerOfNoTenantIsRefusedWhenThereIsNoDefault) {
  Config config;
  config.tenants = {TenantConfig{.name = "others", .uids = {getuid() + 1}}};
  config.default_tenant = "";
  Serve(config);
  int fd = Connect();
  attach::Frame refused = Hello(fd);
  EXPECT_EQ(refused.type, attach::FrameType::kRefused);
  EXPECT_EQ(refused.id, static_cast<uint64_t>(absl::StatusCode::kPermissionDenied));
  EXPECT_NE(refused.text.find(absl::StrCat("uid ", getuid())), std::string::npos) << refused.text;
  EXPECT_NE(refused.text.find("belongs to no tenant"), std::string::npos) << refused.text;
  close(fd);
  EXPECT_TRUE(sessions_.All().empty());
}

TEST_F(AttachServerTest, CallerIsRefusedWithTheAdmissionError) {
  {
    absl::MutexLock lock(&mu_);
    admission_ = absl::UnavailableError("cclod is draining: new sessions refused");
  }
  ExpectRefused(absl::StatusCode::kUnavailable, "cclod is draining: new sessions refused");
}

TEST_F(AttachServerTest, RingsThatCannotBeOpenedRefuseTheCallerWithTheReason) {
  Config config;
  config.tenants[0].quotas.sessions = 1;  // the refused one's lease must be returned
  Serve(config);
  {
    absl::MutexLock lock(&mu_);
    rings_failure_ = absl::ResourceExhaustedError("memfd_create: Too many open files");
  }
  ExpectRefused(absl::StatusCode::kResourceExhausted,
                "cannot open the session's command rings: memfd_create: Too many open files");
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(ended_.size(), 1u);  // the session made for it was ended
    rings_failure_ = absl::OkStatus();
  }
  int next = Connect();
  EXPECT_EQ(Hello(next).type, attach::FrameType::kWelcome);
  close(next);
}

TEST_F(AttachServerTest, CallerListedByUidGetsThatTenant) {
  Config config;
  config.tenants = {TenantConfig{.name = "others", .uids = {getuid() + 1}},
                    TenantConfig{.name = "mine", .uids = {getuid()}}};
  config.default_tenant = "";
  Serve(config);
  int fd = Connect();
  attach::Frame welcome = Hello(fd);
  ASSERT_EQ(welcome.type, attach::FrameType::kWelcome) << welcome.text;
  EXPECT_EQ((*sessions_.FindByToken(welcome.text))->tenant()->name(), "mine");
  close(fd);
}

TEST_F(AttachServerTest, FullSessionsQuotaIsRefusedUntilASessionEnds) {
  Config config;
  config.tenants[0].quotas.sessions = 1;
  Serve(config);
  int first = Connect();
  ASSERT_EQ(Hello(first).type, attach::FrameType::kWelcome);
  int second = Connect();
  attach::Frame refused = Hello(second);
  EXPECT_EQ(refused.type, attach::FrameType::kRefused);
  EXPECT_EQ(refused.id, static_cast<uint64_t>(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(refused.text.find("tenant 'default' quota sessions: limit 1, in use 1"),
            std::string::npos)
      << refused.text;
  close(second);
  close(first);
  {
    absl::MutexLock lock(&mu_);
    auto ended = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !ended_.empty(); };
    ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(10)));
  }
  int third = Connect();
  EXPECT_EQ(Hello(third).type, attach::FrameType::kWelcome);
  close(third);
}

TEST_F(AttachServerTest, ClosingTheConnectionEndsTheSession) {
  int fd = Connect();
  absl::StatusOr<attach::Received> welcome = SayHello(fd);
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  close(fd);
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !ended_.empty(); };
  ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(10)));
  EXPECT_EQ(ended_[0], welcome->frame.id);
  EXPECT_FALSE(sessions_.FindByToken(welcome->frame.text).ok());
}

TEST_F(AttachServerTest, BufferFrameCarriesTheFd) {
  int fd = Connect();
  absl::StatusOr<attach::Received> welcome = SayHello(fd);
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  SessionPtr session = *sessions_.FindByToken(welcome->frame.text);
  absl::StatusOr<SharedBufferPtr> buffer = SharedBuffer::Create(42, 4096);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(session->AddBuffer(*buffer, {}, {}).ok());
  EXPECT_EQ((*buffer)->fd(), -1);  // sent: the daemon keeps only its mapping
  absl::StatusOr<attach::Received> frame =
      attach::ReceiveFrame(fd, hw::SteadyNow() + absl::Seconds(10));
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->frame.type, attach::FrameType::kBuffer);
  EXPECT_EQ(frame->frame.id, 42u);
  EXPECT_EQ(frame->frame.bytes, 4096u);
  ASSERT_GE(frame->fd, 0);
  EXPECT_EQ(lseek(frame->fd, 0, SEEK_END), 4096);
  close(frame->fd);
  close(fd);
}

TEST_F(AttachServerTest, BadHelloIsRefusedAndServerKeepsServing) {
  int fd = Connect();
  uint8_t garbage[attach::kFrameBytes] = {1, 2, 3};
  ASSERT_EQ(write(fd, garbage, sizeof(garbage)), static_cast<ssize_t>(sizeof(garbage)));
  absl::StatusOr<attach::Received> refused =
      attach::ReceiveFrame(fd, hw::SteadyNow() + absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->frame.type, attach::FrameType::kRefused);
  EXPECT_NE(refused->frame.text.find("magic"), std::string::npos) << refused->frame.text;
  close(fd);

  int good = Connect();
  absl::StatusOr<attach::Received> welcome = SayHello(good);
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  EXPECT_EQ(welcome->frame.type, attach::FrameType::kWelcome);
  close(good);
}

TEST_F(AttachServerTest, SilentConnectionDoesNotDelayOthersAndIsRefusedLater) {
  int silent = Connect();  // never sends its HELLO
  int good = Connect();
  absl::StatusOr<attach::Received> welcome = SayHello(good);
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  EXPECT_EQ(welcome->frame.type, attach::FrameType::kWelcome);
  // The silent one is still owed its answer after the good one was welcomed (a server
  // that blocked on the silent HELLO would have refused it first).
  pollfd silent_ready{silent, POLLIN, 0};
  EXPECT_EQ(poll(&silent_ready, 1, 0), 0);
  absl::StatusOr<attach::Received> refused =
      attach::ReceiveFrame(silent, hw::SteadyNow() + absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->frame.type, attach::FrameType::kRefused);
  EXPECT_NE(refused->frame.text.find("no HELLO within 2s"), std::string::npos)
      << refused->frame.text;
  close(silent);
  close(good);
}

// Idle connections cannot hold the daemon's descriptors: one beyond kMaxPending closes
// the oldest of them, with the reason, and the newest is served.
TEST_F(AttachServerTest, ConnectionsWaitingForTheirHelloAreBounded) {
  std::vector<int> silent;
  for (size_t i = 0; i < AttachServer::kMaxPending; ++i) silent.push_back(Connect());
  int newest = Connect();
  // Opened a moment ago, 2 s before its HELLO deadline: its refusal is the eviction.
  absl::StatusOr<attach::Received> refused =
      attach::ReceiveFrame(silent.front(), hw::SteadyNow() + absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->frame.type, attach::FrameType::kRefused);
  EXPECT_EQ(refused->frame.id, static_cast<uint64_t>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(refused->frame.text,
            "more than 256 attach connections were waiting for their HELLO; the oldest is "
            "closed");
  EXPECT_EQ(Hello(newest).type, attach::FrameType::kWelcome);
  close(newest);
  for (int fd : silent) close(fd);
}

// A client slow to send its whole HELLO is waited for without holding up anyone, until
// the HELLO deadline.
TEST_F(AttachServerTest, PartOfAHelloDoesNotDelayOthersAndTheRestMayFollow) {
  absl::StatusOr<std::array<uint8_t, attach::kFrameBytes>> hello =
      attach::Encode({attach::FrameType::kHello, 0, 0, ""});
  ASSERT_TRUE(hello.ok());
  const size_t half = attach::kFrameBytes / 2;
  int slow = Connect();
  ASSERT_EQ(write(slow, hello->data(), half), static_cast<ssize_t>(half));
  int good = Connect();
  EXPECT_EQ(Hello(good).type, attach::FrameType::kWelcome);
  absl::SleepFor(absl::Milliseconds(300));  // a slow client, not a synchronisation
  pollfd slow_ready{slow, POLLIN, 0};
  EXPECT_EQ(poll(&slow_ready, 1, 0), 0);  // still owed its answer
  ASSERT_EQ(send(slow, hello->data() + half, hello->size() - half, MSG_NOSIGNAL),
            static_cast<ssize_t>(hello->size() - half));
  absl::StatusOr<attach::Received> welcome =
      attach::ReceiveFrame(slow, hw::SteadyNow() + absl::Seconds(10));
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  EXPECT_EQ(welcome->frame.type, attach::FrameType::kWelcome);
  close(slow);
  close(good);
}

/// The system call thread `tid` of this process is in (-1 if running).
long SystemCall(pid_t tid) {
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long number = -1;
  file >> number;
  return number;
}

// A client that stops reading its attach socket blocks the sending of its buffers' frames;
// when it ends its session, the send blocked in AllocBuffer ends at once (broken pipe),
// not at its 5 s send timeout with the attach thread waiting behind it.
TEST_F(AttachServerTest, ASendBlockedOnAClientThatDoesNotReadEndsWithItsSession) {
  int fd = Connect();
  absl::StatusOr<attach::Received> welcome = SayHello(fd);
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  SessionPtr session = *sessions_.FindByToken(welcome->frame.text);
  std::atomic<pid_t> sender{0};
  absl::Status last;
  std::thread adding([&] {
    sender = gettid();
    for (uint64_t id = 1; last.ok(); ++id) {
      absl::StatusOr<SharedBufferPtr> buffer = SharedBuffer::Create(id, 1);
      last = buffer.ok() ? session->AddBuffer(*buffer, {}, {}) : buffer.status();
    }
  });
  const hw::SteadyTime give_up = hw::SteadyNow() + absl::Seconds(30);
  int blocked_looks = 0;
  while (blocked_looks < 20 && hw::SteadyNow() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
    blocked_looks =
        sender.load() != 0 && SystemCall(sender.load()) == SYS_sendmsg ? blocked_looks + 1 : 0;
  }
  const bool blocked = blocked_looks == 20;
  const char stray = 'x';
  ASSERT_EQ(write(fd, &stray, 1), 1);  // the server ends the session for it
  adding.join();
  ASSERT_TRUE(blocked) << "AddBuffer never blocked: " << last;
  EXPECT_NE(last.message().find("Broken pipe"), std::string::npos) << last;
  close(fd);
}

TEST_F(AttachServerTest, WrongFirstFrameTypeIsRefused) {
  int fd = Connect();
  ASSERT_TRUE(attach::SendFrame(fd, {attach::FrameType::kBuffer, 1, 1, ""}).ok());
  absl::StatusOr<attach::Received> refused =
      attach::ReceiveFrame(fd, hw::SteadyNow() + absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->frame.type, attach::FrameType::kRefused);
  EXPECT_NE(refused->frame.text.find("expected a HELLO"), std::string::npos);
  close(fd);
}

size_t OpenFds() {
  const absl::StatusOr<uint64_t> open = hw::OpenDescriptors(getpid());
  EXPECT_TRUE(open.ok()) << open.status();
  return open.value_or(0);
}

TEST_F(AttachServerTest, FdsSmuggledIntoHelloAreRefusedAndClosed) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const size_t baseline = OpenFds();
  int fd = Connect();
  auto encoded = attach::Encode({attach::FrameType::kHello, 0, 0, ""});
  ASSERT_TRUE(encoded.ok());
  iovec iov{encoded->data(), encoded->size()};
  const int fds[3] = {pipe_fds[0], pipe_fds[1], pipe_fds[0]};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
  ASSERT_EQ(sendmsg(fd, &msg, 0), static_cast<ssize_t>(encoded->size()));
  absl::StatusOr<attach::Received> refused =
      attach::ReceiveFrame(fd, hw::SteadyNow() + absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->frame.type, attach::FrameType::kRefused);
  EXPECT_NE(refused->frame.text.find("must not carry file descriptors"), std::string::npos)
      << refused->frame.text;
  close(fd);
  // The server (in this process) kept none of the three received descriptors. It closes
  // its end of the connection after the REFUSED frame, on its own thread: wait for that.
  const hw::SteadyTime give_up = hw::SteadyNow() + absl::Seconds(10);
  while (OpenFds() != baseline && hw::SteadyNow() < give_up) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(OpenFds(), baseline);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// Whatever a caller sends as its first frame, the daemon answers it and goes on serving:
// a HELLO gets a session, anything else REFUSED with INVALID_ARGUMENT and the reason.
TEST_F(AttachServerTest, RandomFirstFramesAreWelcomedOrRefusedAsInvalid) {
  Config config;
  config.tenants[0].quotas.sessions = 1000;  // sessions end on the server's thread, later
  Serve(config);
  absl::StatusOr<std::array<uint8_t, attach::kFrameBytes>> hello =
      attach::Encode({attach::FrameType::kHello, 0, 0, ""});
  ASSERT_TRUE(hello.ok());
  testing::Mutator random(17);
  size_t welcomed = 0, refused = 0;
  for (int round = 0; round < 200; ++round) {
    std::array<uint8_t, attach::kFrameBytes> bytes = *hello;
    random.FlipBytes(bytes.data(), bytes.size());
    if (random.OneIn(2)) bytes[6] = static_cast<uint8_t>(random.Below(6));  // the type
    const absl::StatusOr<attach::Frame> decoded = attach::Decode(bytes.data(), bytes.size());
    int fd = Connect();
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
    absl::StatusOr<attach::Received> answer =
        attach::ReceiveFrame(fd, hw::SteadyNow() + absl::Seconds(10));
    ASSERT_TRUE(answer.ok()) << answer.status();
    if (answer->fd >= 0) close(answer->fd);
    for (int extra : answer->more_fds) close(extra);
    if (decoded.ok() && decoded->type == attach::FrameType::kHello) {
      EXPECT_EQ(answer->frame.type, attach::FrameType::kWelcome) << answer->frame.text;
      ++welcomed;
    } else {
      EXPECT_EQ(answer->frame.type, attach::FrameType::kRefused);
      EXPECT_EQ(answer->frame.id, static_cast<uint64_t>(absl::StatusCode::kInvalidArgument));
      EXPECT_EQ(answer->frame.text, decoded.ok() ? absl::StrCat("expected a HELLO frame, got type ",
                                                                static_cast<int>(decoded->type))
                                                 : std::string(decoded.status().message()));
      ++refused;
    }
    close(fd);
  }
  EXPECT_GT(welcomed, 0u);
  EXPECT_GT(refused, 0u);
  {
    // Every session ended with its connection.
    absl::MutexLock lock(&mu_);
    auto ended = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return ended_.size() == welcomed; };
    ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(10)));
  }
  EXPECT_TRUE(sessions_.All().empty());
  int good = Connect();
  EXPECT_EQ(Hello(good).type, attach::FrameType::kWelcome);
  close(good);
}

}  // namespace
}  // namespace cclo::daemon
