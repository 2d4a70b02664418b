// The attach protocol's frames (cclo/v1/attach.h) as either side reads them: Decode
// refuses every malformed frame by name, and ReceiveFrame takes a frame that comes in any
// pieces, with any descriptors, without keeping more than its share or leaking any.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cclo/v1/attach.h"
#include "hw/clock.h"
#include "hw/process.h"
#include "tests/fuzz/mutator.h"

namespace cclo::attach {
namespace {

using Bytes = std::array<uint8_t, kFrameBytes>;

/// Where the fields sit in a frame.
constexpr size_t kVersionAt = 4;
constexpr size_t kTypeAt = 6;
constexpr size_t kTextAt = 24;

TEST(AttachFrameTest, DecodeRejectsEachBadField) {
  auto encoded = Encode({FrameType::kWelcome, 1, 0, "token"});
  ASSERT_TRUE(encoded.ok());
  auto bytes = *encoded;
  EXPECT_TRUE(Decode(bytes.data(), bytes.size()).ok());
  EXPECT_FALSE(Decode(bytes.data(), bytes.size() - 1).ok());
  auto bad_version = bytes;
  bad_version[4] = 9;
  EXPECT_NE(Decode(bad_version.data(), bad_version.size()).status().message().find("version 9"),
            std::string::npos);
  auto bad_type = bytes;
  bad_type[6] = 77;
  EXPECT_NE(Decode(bad_type.data(), bad_type.size()).status().message().find("type 77"),
            std::string::npos);
  auto unterminated = bytes;
  std::fill(unterminated.begin() + 24, unterminated.end(), 'x');
  EXPECT_NE(
      Decode(unterminated.data(), unterminated.size()).status().message().find("not terminated"),
      std::string::npos);
  EXPECT_FALSE(Encode({FrameType::kRefused, 0, 0, std::string(300, 'e')}).ok());
}

/// Valid frames of every type, to mutate.
std::vector<Bytes> Seeds() {
  std::vector<Bytes> seeds;
  for (const Frame& frame : {Frame{FrameType::kHello, 0, 0, ""},
                             Frame{FrameType::kWelcome, 7, 1 << 20, std::string(64, 't')},
                             Frame{FrameType::kRefused, 7, 0, std::string(kTextBytes - 1, 'r')},
                             Frame{FrameType::kBuffer, 3, 4096, ""}}) {
    absl::StatusOr<Bytes> bytes = Encode(frame);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    seeds.push_back(*bytes);
  }
  return seeds;
}

/// A seed with random bytes, or a few changed, or a field near its bounds.
Bytes Mutate(testing::Mutator& random, const std::vector<Bytes>& seeds, bool any) {
  Bytes bytes = random.Pick(seeds);
  if (any) {
    random.Fill(bytes.data(), bytes.size());
  } else {
    random.FlipBytes(bytes.data(), bytes.size());
  }
  switch (random.Below(6)) {
    case 0:
      bytes[kTypeAt] = static_cast<uint8_t>(random.Below(6));
      bytes[kTypeAt + 1] = 0;
      break;
    case 1:
      bytes[kVersionAt] = static_cast<uint8_t>(random.Below(3));
      break;
    case 2: {  // a text of any length, its NUL anywhere or nowhere
      std::fill(bytes.begin() + kTextAt, bytes.end(), 'x');
      if (const uint64_t nul = random.Below(kTextBytes + 1); nul < kTextBytes) {
        bytes[kTextAt + nul] = 0;
      }
      break;
    }
  }
  return bytes;
}

/// What every frame Decode accepts satisfies (attach.h).
void ExpectValid(const Frame& frame) {
  EXPECT_GE(static_cast<int>(frame.type), static_cast<int>(FrameType::kHello));
  EXPECT_LE(static_cast<int>(frame.type), static_cast<int>(FrameType::kBuffer));
  EXPECT_LT(frame.text.size(), kTextBytes);
  EXPECT_EQ(frame.text.find('\0'), std::string::npos);
}

TEST(AttachFrameTest, RandomBytesAreRefusedByNameOrReencodeAsTheyCame) {
  testing::Mutator random(13);
  const std::vector<Bytes> seeds = Seeds();
  std::vector<uint8_t> input(kFrameBytes + 8);  // room for a frame too long
  std::vector<int> accepted(5);
  constexpr int kRounds = 200000;
  for (int round = 0; round < kRounds; ++round) {
    const Bytes bytes = Mutate(random, seeds, round % 4 == 0);
    std::copy(bytes.begin(), bytes.end(), input.begin());
    const size_t size = random.OneIn(8) ? random.Below(input.size() + 1) : kFrameBytes;
    absl::StatusOr<Frame> frame = Decode(input.data(), size);
    if (!frame.ok()) {
      EXPECT_EQ(frame.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_FALSE(frame.status().message().empty());
      continue;
    }
    ASSERT_EQ(size, kFrameBytes);
    ++accepted[static_cast<int>(frame->type) % accepted.size()];
    ExpectValid(*frame);
    // Encoded again, it is the frame that came, but for the bytes past the text's NUL,
    // which no side reads (an encoder writes zeros there).
    Bytes expected = bytes;
    std::fill(expected.begin() + kTextAt + frame->text.size(), expected.end(), 0);
    absl::StatusOr<Bytes> again = Encode(*frame);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, expected) << "round " << round;
  }
  for (int type = 1; type <= 4; ++type) EXPECT_GT(accepted[type], 0) << "type " << type;
}

size_t OpenFds() {
  const absl::StatusOr<uint64_t> open = hw::OpenDescriptors(getpid());
  EXPECT_TRUE(open.ok()) << open.status();
  return open.value_or(0);
}

/// Sends `size` bytes with `fd_count` copies of `fd` attached; whether all went.
bool SendWithFds(int socket_fd, const uint8_t* data, size_t size, int fd, size_t fd_count) {
  iovec iov{const_cast<uint8_t*>(data), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<int> fds(fd_count, fd);
  std::vector<char> control(CMSG_SPACE(fds.size() * sizeof(int)));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), fds.data(), fds.size() * sizeof(int));
  }
  return sendmsg(socket_fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(size);
}

// A frame in 1 to 3 pieces, each with up to 5 descriptors (one message has room for
// kMaxFds + 1), perhaps cut short by the sender closing: ReceiveFrame answers what Decode
// does of a whole frame, INVALID_ARGUMENT for too many descriptors in one message, and
// UNAVAILABLE for a frame cut short; it keeps at most kMaxFds descriptors and closes the
// others.
TEST(AttachFrameTest, ReceiveFrameTakesAnyPiecesAndDescriptorsAndLeaksNone) {
  testing::Mutator random(21);
  const std::vector<Bytes> seeds = Seeds();
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const size_t baseline = OpenFds();
  std::vector<int> outcomes(3);  // received, refused, cut short
  constexpr int kRounds = 3000;
  for (int round = 0; round < kRounds; ++round) {
    const Bytes bytes = random.OneIn(2) ? random.Pick(seeds) : Mutate(random, seeds, false);
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    const size_t sent = random.OneIn(8) ? random.Below(kFrameBytes) : kFrameBytes;
    std::vector<size_t> cuts = {0, sent};
    for (uint64_t i = 0, more = random.Below(3); i < more && sent > 1; ++i) {
      cuts.push_back(1 + random.Below(sent - 1));
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    size_t fds_sent = 0;
    bool too_many = false;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const size_t fd_count = random.OneIn(3) ? random.Below(6) : 0;
      ASSERT_TRUE(SendWithFds(pair[1], bytes.data() + cuts[i], cuts[i + 1] - cuts[i], pipe_fds[0],
                              fd_count));
      fds_sent += fd_count;
      too_many |= fd_count > kMaxFds + 1;
    }
    if (sent < kFrameBytes) close(pair[1]);
    absl::StatusOr<Received> received = ReceiveFrame(pair[0], hw::SteadyNow() + absl::Seconds(10));
    const absl::StatusOr<Frame> decoded = Decode(bytes.data(), bytes.size());
    if (too_many) {
      ASSERT_FALSE(received.ok());
      EXPECT_EQ(received.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(received.status().message(), "attach message carried too many fds");
      ++outcomes[1];
    } else if (sent < kFrameBytes) {
      ASSERT_FALSE(received.ok());
      EXPECT_EQ(received.status().code(), absl::StatusCode::kUnavailable);
      EXPECT_FALSE(received.status().message().empty());
      ++outcomes[2];
    } else if (!decoded.ok()) {
      ASSERT_FALSE(received.ok());
      EXPECT_EQ(received.status(), decoded.status());
      ++outcomes[1];
    } else {
      ASSERT_TRUE(received.ok()) << received.status();
      EXPECT_EQ(received->frame.type, decoded->type);
      EXPECT_EQ(received->frame.id, decoded->id);
      EXPECT_EQ(received->frame.bytes, decoded->bytes);
      EXPECT_EQ(received->frame.text, decoded->text);
      // The first kMaxFds that came, each a descriptor of the pipe, closed on exec.
      EXPECT_EQ((received->fd >= 0) + received->more_fds.size(), std::min(fds_sent, kMaxFds));
      std::vector<int> fds = received->more_fds;
      if (received->fd >= 0) fds.push_back(received->fd);
      for (int fd : fds) {
        struct stat info {};
        EXPECT_EQ(fstat(fd, &info), 0);
        EXPECT_TRUE(S_ISFIFO(info.st_mode));
        EXPECT_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC);
        close(fd);
      }
      ++outcomes[0];
    }
    close(pair[0]);
    if (sent == kFrameBytes) close(pair[1]);
  }
  EXPECT_EQ(OpenFds(), baseline);
  for (int count : outcomes) EXPECT_GT(count, kRounds / 20);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// A deadline further off than poll's int of milliseconds takes: the frame that comes is
// received, not a DEADLINE_EXCEEDED when the wrapped wait (here 10 ms: 2^32 ms on) ran out.
TEST(AttachFrameTest, ReceiveFrameWaitsForAFramePastAFarDeadline) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  absl::StatusOr<Bytes> bytes = Encode({FrameType::kWelcome, 1, 0, "token"});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::thread sender([&] {
    absl::SleepFor(absl::Milliseconds(200));
    EXPECT_EQ(write(pair[1], bytes->data(), bytes->size()), static_cast<ssize_t>(bytes->size()));
  });
  absl::StatusOr<Received> received =
      ReceiveFrame(pair[0], hw::SteadyNow() + absl::Milliseconds((int64_t{1} << 32) + 10));
  sender.join();
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(received->frame.text, "token");
  close(pair[0]);
  close(pair[1]);
}

}  // namespace
}  // namespace cclo::attach
