#include "tests/e2e/raw_session.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cclo/v1/attach.h"
#include "hw/clock.h"

namespace cclo::testing {

int ConnectUnix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) return fd;
  const int error = errno;
  close(fd);
  errno = error;
  return -1;
}

grpc::Status ForeignPeerJoin(const std::string& peer_address, const std::string& daemon_address) {
  std::unique_ptr<cclo::v1::Peer::Stub> stub = cclo::v1::Peer::NewStub(
      grpc::CreateChannel(peer_address, grpc::InsecureChannelCredentials()));
  cclo::v1::PeerJoinRequest request;
  request.set_version(1);
  request.set_comm_id(std::string(16, '\x01'));
  request.set_size(2);
  request.set_timeout_ms(1000);
  request.set_daemon_address(daemon_address);
  cclo::v1::PeerJoinResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub->Join(&context, request, &response);
}

RawSession::RawSession(const std::string& runtime_dir) {
  attach_fd_ = ConnectUnix(runtime_dir + "/attach.sock");
  if (attach_fd_ < 0 ||
      !attach::SendFrame(attach_fd_, {attach::FrameType::kHello, 0, 0, ""}).ok()) {
    std::perror("raw session attach");
    std::abort();
  }
  absl::StatusOr<attach::Received> welcome =
      attach::ReceiveFrame(attach_fd_, hw::SteadyNow() + absl::Seconds(10));
  if (!welcome.ok() || welcome->frame.type != attach::FrameType::kWelcome || welcome->fd < 0 ||
      welcome->more_fds.size() != 2) {
    // A WELCOME's text is the session token: not printed.
    const std::string reason =
        !welcome.ok() ? std::string(welcome.status().message())
        : welcome->frame.type == attach::FrameType::kWelcome
            ? std::string("a welcome without them")
            : absl::StrCat("frame type ", static_cast<int>(welcome->frame.type), " code ",
                           welcome->frame.id, ": ", welcome->frame.text);
    std::fprintf(stderr, "raw session attach: no welcome with the ring and doorbells: %s\n",
                 reason.c_str());
    std::abort();
  }
  token_ = welcome->frame.text;
  rings_ = mmap(nullptr, ring::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, welcome->fd, 0);
  if (rings_ == MAP_FAILED) std::abort();
  close(welcome->fd);
  command_doorbell_ = welcome->more_fds[0];
  completion_doorbell_ = welcome->more_fds[1];
  stub_ = cclo::v1::Client::NewStub(grpc::CreateChannel("unix:" + runtime_dir + "/client.sock",
                                                        grpc::InsecureChannelCredentials()));
}

RawSession::~RawSession() {
  if (attach_fd_ >= 0) close(attach_fd_);
  munmap(rings_, ring::kRingBytes);
  close(command_doorbell_);
  close(completion_doorbell_);
}

void RawSession::Detach() {
  close(attach_fd_);
  attach_fd_ = -1;
}

void RawSession::Post(const ring::CommandSlot& slot) { PostAll({slot}); }

void RawSession::PostAll(const std::vector<ring::CommandSlot>& slots) {
  for (const ring::CommandSlot& slot : slots) {
    ring::Commands(rings_)[command_head_++ % ring::kCommandSlots] = slot;
  }
  PublishCommandHead(command_head_);
}

void RawSession::SetSleeping(bool sleeping) {
  ring::Header(rings_)->client_waiters.store(sleeping ? 1 : 0, std::memory_order_seq_cst);
}

uint64_t RawSession::TakeDoorbellRings(absl::Duration wait) {
  pollfd doorbell{completion_doorbell_, POLLIN, 0};
  const int ready = poll(&doorbell, 1, static_cast<int>(absl::ToInt64Milliseconds(wait)));
  char rings[4096];  // each ring is a byte in the daemon's pipe
  const ssize_t count = ready > 0 ? read(completion_doorbell_, rings, sizeof(rings)) : 0;
  if (ready < 0 || count < 0) {
    std::perror("completion doorbell");
    std::abort();
  }
  return static_cast<uint64_t>(count);
}

void RawSession::JamDoorbells() {
  for (int doorbell : {command_doorbell_, completion_doorbell_}) {
    if (fcntl(doorbell, F_SETFL, fcntl(doorbell, F_GETFL) & ~O_NONBLOCK) != 0) {
      std::perror("doorbell flags");
      std::abort();
    }
  }
  const uint64_t most = UINT64_MAX - 1;  // an eventfd's counter holds at most this
  (void)!write(completion_doorbell_, &most, sizeof(most));
}

void RawSession::AwaitPosted(uint64_t count) {
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Seconds(30);
  while (ring::Header(rings_)->completion_head.load(std::memory_order_acquire) <
         completion_tail_ + count) {
    if (hw::SteadyNow() >= deadline) {
      std::fprintf(stderr, "fewer than %" PRIu64 " completions on the ring within 30 s\n", count);
      std::abort();
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void RawSession::AwaitDaemonSleeping() {
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Seconds(30);
  ring::RingHeader* header = ring::Header(rings_);
  // The flag is read after the daemon was seen to take the last command: it is clear
  // whenever the daemon polls, so a set flag then says it went to sleep since.
  while (header->command_tail.load(std::memory_order_seq_cst) < command_head_ ||
         header->daemon_sleeping.load(std::memory_order_seq_cst) == 0) {
    if (hw::SteadyNow() >= deadline) {
      std::fprintf(stderr, "the daemon did not sleep within 30 s\n");
      std::abort();
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

uint64_t RawSession::CommandsTaken() const {
  return ring::Header(rings_)->command_tail.load(std::memory_order_acquire);
}

void RawSession::PublishCommandHead(uint64_t head) {
  ring::Header(rings_)->command_head.store(head, std::memory_order_seq_cst);
  const uint64_t one = 1;
  if (write(command_doorbell_, &one, sizeof(one)) != sizeof(one)) std::abort();
}

ring::CompletionSlot RawSession::NextCompletion() {
  ring::RingHeader* header = ring::Header(rings_);
  const hw::SteadyTime deadline = hw::SteadyNow() + absl::Seconds(30);
  while (header->completion_head.load(std::memory_order_acquire) == completion_tail_) {
    if (hw::SteadyNow() >= deadline) {
      std::fprintf(stderr, "no completion on the ring within 30 s\n");
      std::abort();
    }
    header->client_waiters.fetch_add(1, std::memory_order_seq_cst);
    if (header->completion_head.load(std::memory_order_seq_cst) == completion_tail_) {
      pollfd doorbell{completion_doorbell_, POLLIN, 0};
      if (poll(&doorbell, 1, 100) > 0) {
        uint64_t count;
        (void)!read(completion_doorbell_, &count, sizeof(count));
      }
    }
    header->client_waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
  const ring::CompletionSlot slot =
      ring::Completions(rings_)[completion_tail_ % ring::kCompletionSlots];
  header->completion_tail.store(++completion_tail_, std::memory_order_seq_cst);
  return slot;
}

ring::CompletionSlot RawSession::Posted(uint64_t n) const {
  return ring::Completions(rings_)[(completion_tail_ + n) % ring::kCompletionSlots];
}

grpc::Status RawSession::RunOnRing(const cclo::v1::SubmitRequest& request) {
  ring::CommandSlot slot;
  const uint64_t cookie = next_cookie_++;
  if (!ring::EncodeCommand(request, cookie, slot).ok()) std::abort();
  Post(slot);
  bool accepted = false;
  while (true) {
    const ring::CompletionSlot completion = NextCompletion();
    if (completion.cookie != cookie) continue;
    switch (static_cast<ring::CompletionKind>(completion.kind)) {
      case ring::CompletionKind::kAccepted:
        accepted = true;
        break;
      case ring::CompletionKind::kRejected:
      case ring::CompletionKind::kFinished:
        // An op may finish before its acceptance is posted; wait for both.
        if (completion.kind == static_cast<uint32_t>(ring::CompletionKind::kFinished) &&
            !accepted) {
          NextCompletion();  // its ACCEPTED, the only other completion of this cookie
        }
        return grpc::Status(static_cast<grpc::StatusCode>(completion.code),
                            ring::GetText(completion.message, ring::kMessageBytes));
    }
  }
}

std::unique_ptr<grpc::ClientContext> RawSession::Context() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->AddMetadata("cclo-session", token_);
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return context;
}

uint64_t RawSession::Alloc(uint64_t bytes) {
  cclo::v1::AllocBufferRequest request;
  request.set_bytes(bytes);
  cclo::v1::AllocBufferResponse response;
  grpc::Status status = stub_->AllocBuffer(Context().get(), request, &response);
  if (!status.ok()) std::abort();
  absl::StatusOr<attach::Received> frame =
      attach::ReceiveFrame(attach_fd_, hw::SteadyNow() + absl::Seconds(10));
  if (!frame.ok() || frame->frame.id != response.buffer_id()) std::abort();
  close(frame->fd);
  return response.buffer_id();
}

}  // namespace cclo::testing

namespace cclo::testing {

cclo::v1::SubmitRequest AllreduceRequest(uint64_t comm_handle, uint64_t buffer, uint64_t count) {
  cclo::v1::SubmitRequest request;
  request.set_comm_handle(comm_handle);
  request.set_collective(cclo::v1::ALLREDUCE);
  request.set_datatype(cclo::v1::FLOAT32);
  request.set_count(count);
  for (cclo::v1::BufferRef* ref : {request.mutable_send(), request.mutable_recv()}) {
    ref->set_buffer_id(buffer);
    ref->set_length(count * 4);
  }
  return request;
}

std::string RawSession::NewToken() {
  cclo::v1::CreateCommunicatorIdResponse response;
  if (!stub_->CreateCommunicatorId(Context().get(), {}, &response).ok()) std::abort();
  return response.token();
}

grpc::Status RawSession::Join(const std::string& token, uint32_t rank, uint32_t size,
                              uint64_t* handle, uint32_t timeout_ms) {
  cclo::v1::JoinCommunicatorRequest request;
  request.set_token(token);
  request.set_rank(rank);
  request.set_size(size);
  request.set_timeout_ms(timeout_ms);
  cclo::v1::JoinCommunicatorResponse response;
  std::unique_ptr<grpc::ClientContext> context = Context();
  // Room for the daemon's answer after the join's own timeout.
  const auto answered = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms) +
                        std::chrono::seconds(10);
  if (answered > context->deadline()) context->set_deadline(answered);
  grpc::Status status = stub_->JoinCommunicator(context.get(), request, &response);
  if (handle) *handle = response.comm_handle();
  return status;
}

grpc::Status RawSession::Destroy(uint64_t handle) {
  cclo::v1::DestroyCommunicatorRequest request;
  request.set_comm_handle(handle);
  cclo::v1::DestroyCommunicatorResponse response;
  return stub_->DestroyCommunicator(Context().get(), request, &response);
}

grpc::Status RawSession::Run(const cclo::v1::SubmitRequest& request, uint32_t wait_ms) {
  cclo::v1::SubmitResponse submitted;
  grpc::Status status = stub_->Submit(Context().get(), request, &submitted);
  if (!status.ok()) return status;
  cclo::v1::WaitRequest wait;
  wait.set_op_id(submitted.op_id());
  wait.set_timeout_ms(wait_ms);
  cclo::v1::WaitResponse done;
  status = stub_->Wait(Context().get(), wait, &done);
  if (!status.ok()) return status;
  if (!done.done()) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "op still running");
  return grpc::Status(static_cast<grpc::StatusCode>(done.code()), done.message());
}

}  // namespace cclo::testing
