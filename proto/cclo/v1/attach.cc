#include "cclo/v1/attach.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cclo::attach {
namespace {

void Put(uint8_t*& out, const void* value, size_t size) {
  std::memcpy(out, value, size);
  out += size;
}

void Get(const uint8_t*& in, void* value, size_t size) {
  std::memcpy(value, in, size);
  in += size;
}

/// Room for this many fds per message; more are truncated by the kernel and refused.
constexpr size_t kMaxFdsPerMessage = kMaxFds + 1;

absl::Status Errno(const char* what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::array<uint8_t, kFrameBytes>> Encode(const Frame& frame) {
  if (frame.text.size() >= kTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat("attach frame text of ", frame.text.size(),
                                                   " bytes exceeds ", kTextBytes - 1));
  }
  std::array<uint8_t, kFrameBytes> bytes{};
  uint8_t* out = bytes.data();
  uint16_t type = static_cast<uint16_t>(frame.type);
  Put(out, &kMagic, 4);
  Put(out, &kVersion, 2);
  Put(out, &type, 2);
  Put(out, &frame.id, 8);
  Put(out, &frame.bytes, 8);
  Put(out, frame.text.data(), frame.text.size());
  return bytes;
}

absl::StatusOr<Frame> Decode(const uint8_t* data, size_t size) {
  if (size != kFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("attach frame has ", size, " bytes, expected ", kFrameBytes));
  }
  const uint8_t* in = data;
  uint32_t magic;
  uint16_t version, type;
  Frame frame;
  Get(in, &magic, 4);
  Get(in, &version, 2);
  Get(in, &type, 2);
  Get(in, &frame.id, 8);
  Get(in, &frame.bytes, 8);
  if (magic != kMagic) {
    return absl::InvalidArgumentError(absl::StrCat("attach frame magic 0x", absl::Hex(magic),
                                                   " is not 0x", absl::Hex(kMagic)));
  }
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("attach protocol version ", version, " unsupported; this side speaks ",
                     kVersion));
  }
  if (type < static_cast<uint16_t>(FrameType::kHello) ||
      type > static_cast<uint16_t>(FrameType::kBuffer)) {
    return absl::InvalidArgumentError(absl::StrCat("attach frame type ", type, " unknown"));
  }
  frame.type = static_cast<FrameType>(type);
  const void* nul = std::memchr(in, 0, kTextBytes);
  if (nul == nullptr) return absl::InvalidArgumentError("attach frame text is not terminated");
  frame.text.assign(reinterpret_cast<const char*>(in), static_cast<const uint8_t*>(nul) - in);
  return frame;
}

absl::Status SendFrame(int socket_fd, const Frame& frame, absl::Span<const int> fds) {
  if (fds.size() > kMaxFds) {
    return absl::InvalidArgumentError(
        absl::StrCat("attach frame with ", fds.size(), " fds; at most ", kMaxFds));
  }
  absl::StatusOr<std::array<uint8_t, kFrameBytes>> bytes = Encode(frame);
  if (!bytes.ok()) return bytes.status();
  iovec iov{bytes->data(), bytes->size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), fds.data(), fds.size() * sizeof(int));
  }
  ssize_t sent;
  do {
    sent = sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return Errno("attach send");
  if (static_cast<size_t>(sent) != kFrameBytes) {
    return absl::UnavailableError("attach send: short write");
  }
  return absl::OkStatus();
}

absl::StatusOr<Received> ReceiveFrame(int socket_fd, hw::SteadyTime deadline) {
  std::array<uint8_t, kFrameBytes> bytes{};
  size_t have = 0;
  Received received;
  // Every fd that arrives is ours to close: keep the first kMaxFds, close any other at once.
  auto fail = [&received](absl::Status status) -> absl::StatusOr<Received> {
    if (received.fd >= 0) close(received.fd);
    for (int fd : received.more_fds) close(fd);
    return status;
  };
  while (have < kFrameBytes) {
    // poll takes an int: a wait past INT_MAX ms (some 24 days, an infinite deadline) goes in
    // steps of that.
    const int64_t left_ms = absl::ToInt64Milliseconds(hw::Left(deadline));
    pollfd pfd{socket_fd, POLLIN, 0};
    int ready = poll(&pfd, 1, static_cast<int>(std::clamp<int64_t>(left_ms, 0, INT_MAX)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return fail(Errno("attach poll"));
    if (ready == 0 && left_ms > INT_MAX) continue;
    if (ready == 0) {
      return fail(absl::DeadlineExceededError("attach frame did not arrive before the deadline"));
    }
    iovec iov{bytes.data() + have, kFrameBytes - have};
    alignas(cmsghdr) char control[CMSG_SPACE(kMaxFdsPerMessage * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t got = recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) return fail(Errno("attach receive"));
    for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
      if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
        if (received.fd < 0) {
          received.fd = fd;
        } else if (received.more_fds.size() + 1 < kMaxFds) {
          received.more_fds.push_back(fd);
        } else {
          close(fd);
        }
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
      return fail(absl::InvalidArgumentError("attach message carried too many fds"));
    }
    if (got == 0) return fail(absl::UnavailableError("attach socket closed by the other side"));
    have += static_cast<size_t>(got);
  }
  absl::StatusOr<Frame> frame = Decode(bytes.data(), bytes.size());
  if (!frame.ok()) return fail(frame.status());
  received.frame = *std::move(frame);
  return received;
}

}  // namespace cclo::attach
