#include "tests/client/fake_client_service.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cclo/v1/attach.h"

namespace cclo::testing {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

template <typename T>
void Reduce(v1::ReduceOp op, T* accumulator, const T* in, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    switch (op) {
      case v1::MAX:
        accumulator[i] = std::max(accumulator[i], in[i]);
        break;
      case v1::MIN:
        accumulator[i] = std::min(accumulator[i], in[i]);
        break;
      default:
        accumulator[i] += in[i];
    }
  }
}

template <typename T>
void ReduceBytes(v1::ReduceOp op, uint8_t* accumulator, const uint8_t* in, uint64_t bytes) {
  Reduce(op, reinterpret_cast<T*>(accumulator), reinterpret_cast<const T*>(in), bytes / sizeof(T));
}

}  // namespace

FakeClientService::~FakeClientService() {
  for (auto& [id, buffer] : buffers_) munmap(buffer.data, buffer.bytes);
  for (auto& [token, fd] : sessions_) close(fd);
}

std::string FakeClientService::AddSession(uint64_t id, int attach_fd) {
  absl::MutexLock lock(&mutex_);
  last_token_ = absl::StrCat("token-", id);
  sessions_[last_token_] = attach_fd;
  return last_token_;
}

std::string FakeClientService::last_token() const {
  absl::MutexLock lock(&mutex_);
  return last_token_;
}

size_t FakeClientService::buffer_count() const {
  absl::MutexLock lock(&mutex_);
  return buffers_.size();
}

absl::StatusOr<std::string> FakeClientService::Session(grpc::ServerContext* context) {
  auto entry = context->client_metadata().find("cclo-session");
  if (entry != context->client_metadata().end()) {
    std::string token(entry->second.data(), entry->second.size());
    if (sessions_.count(token)) return token;
  }
  return absl::UnauthenticatedError("missing or unknown cclo-session");
}

absl::StatusOr<uint8_t*> FakeClientService::Resolve(const std::string& session,
                                                    const v1::BufferRef& ref) {
  auto buffer = buffers_.find(ref.buffer_id());
  if (buffer == buffers_.end() || buffer->second.session != session) {
    return absl::PermissionDeniedError(absl::StrCat("buffer ", ref.buffer_id(), " not yours"));
  }
  if (ref.offset() > buffer->second.bytes || ref.length() > buffer->second.bytes - ref.offset()) {
    return absl::InvalidArgumentError(absl::StrCat("range out of buffer ", ref.buffer_id()));
  }
  return buffer->second.data + ref.offset();
}

grpc::Status FakeClientService::AllocBuffer(grpc::ServerContext* context,
                                            const v1::AllocBufferRequest* request,
                                            v1::AllocBufferResponse* response) {
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<std::string> session = Session(context);
  if (!session.ok()) return ToGrpc(session.status());
  if (request->bytes() == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "buffer of 0 bytes");
  }
  int fd = memfd_create("fake-buffer", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(request->bytes())) != 0) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "memfd");
  }
  void* data = mmap(nullptr, request->bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const uint64_t id = next_id_++;
  attach::Frame frame;
  frame.type = attach::FrameType::kBuffer;
  frame.id = id;
  frame.bytes = request->bytes();
  absl::Status sent = attach::SendFrame(sessions_[*session], frame, fd);
  close(fd);
  if (data == MAP_FAILED || !sent.ok()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "mmap or attach send failed");
  }
  buffers_[id] = {*session, static_cast<uint8_t*>(data), request->bytes()};
  response->set_buffer_id(id);
  response->set_bytes(request->bytes());
  return grpc::Status::OK;
}

grpc::Status FakeClientService::FreeBuffer(grpc::ServerContext* context,
                                           const v1::FreeBufferRequest* request,
                                           v1::FreeBufferResponse*) {
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<std::string> session = Session(context);
  if (!session.ok()) return ToGrpc(session.status());
  auto buffer = buffers_.find(request->buffer_id());
  if (buffer == buffers_.end() || buffer->second.session != *session) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no buffer ", request->buffer_id()));
  }
  munmap(buffer->second.data, buffer->second.bytes);
  buffers_.erase(buffer);
  return grpc::Status::OK;
}

grpc::Status FakeClientService::CreateCommunicatorId(grpc::ServerContext* context,
                                                     const v1::CreateCommunicatorIdRequest*,
                                                     v1::CreateCommunicatorIdResponse* response) {
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<std::string> session = Session(context);
  if (!session.ok()) return ToGrpc(session.status());
  const std::string token = absl::StrCat("comm-", next_id_++);
  comms_[token];
  response->set_token(token);
  return grpc::Status::OK;
}

grpc::Status FakeClientService::JoinCommunicator(grpc::ServerContext* context,
                                                 const v1::JoinCommunicatorRequest* request,
                                                 v1::JoinCommunicatorResponse* response) {
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<std::string> session = Session(context);
  if (!session.ok()) return ToGrpc(session.status());
  auto comm = comms_.find(request->token());
  if (comm == comms_.end()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("unknown token '", request->token(), "'"));
  }
  if (comm->second.size == 0) comm->second.size = request->size();
  if (request->size() != comm->second.size || request->rank() >= request->size()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad rank or size");
  }
  const uint64_t handle = next_id_++;
  members_[handle] = {request->token(), request->rank()};
  comm->second.handles.resize(comm->second.size);
  comm->second.handles[request->rank()] = handle;
  ++comm->second.joined;
  changed_.SignalAll();
  const absl::Time deadline = absl::Now() + absl::Milliseconds(request->timeout_ms());
  while (comm->second.joined < comm->second.size) {
    if (changed_.WaitWithDeadline(&mutex_, deadline)) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "not all ranks joined");
    }
  }
  response->set_comm_handle(handle);
  response->set_comm_id(absl::StrCat("c0ffee", request->token().substr(5)));
  return grpc::Status::OK;
}

grpc::Status FakeClientService::DestroyCommunicator(grpc::ServerContext* context,
                                                    const v1::DestroyCommunicatorRequest* request,
                                                    v1::DestroyCommunicatorResponse*) {
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<std::string> session = Session(context);
  if (!session.ok()) return ToGrpc(session.status());
  if (members_.erase(request->comm_handle()) == 0) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no communicator handle ", request->comm_handle()));
  }
  return grpc::Status::OK;
}

grpc::Status FakeClientService::Submit(grpc::ServerContext* context,
                                       const v1::SubmitRequest* request,
                                       v1::SubmitResponse* response) {
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<std::string> session = Session(context);
  if (!session.ok()) return ToGrpc(session.status());
  auto member = members_.find(request->comm_handle());
  if (member == members_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no communicator handle ", request->comm_handle()));
  }
  const bool point_to_point =
      request->collective() == v1::SEND || request->collective() == v1::RECV;
  const uint32_t size = comms_[member->second.comm_token].size;
  if (point_to_point && (request->peer() >= size || request->peer() == member->second.rank)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("peer ", request->peer(), " is not another rank"));
  }
  Pending pending{next_id_++, *request};
  if (request->has_send()) {
    absl::StatusOr<uint8_t*> send = Resolve(*session, request->send());
    if (!send.ok()) return ToGrpc(send.status());
    pending.send = *send;
  }
  if (request->has_recv()) {
    absl::StatusOr<uint8_t*> recv = Resolve(*session, request->recv());
    if (!recv.ok()) return ToGrpc(recv.status());
    pending.recv = *recv;
  }
  ops_[pending.op_id];
  response->set_op_id(pending.op_id);
  if (request->algorithm() == "fail") {
    Complete(pending, grpc::StatusCode::ABORTED, "op failed as asked");
    return grpc::Status::OK;
  }
  member->second.queue.push_back(std::move(pending));
  Progress(member->second.comm_token);
  return grpc::Status::OK;
}

void FakeClientService::Progress(const std::string& comm_token) {
  const std::vector<uint64_t>& handles = comms_[comm_token].handles;
  auto front = [&](uint32_t rank) -> Pending* {
    auto member = members_.find(handles[rank]);
    if (member == members_.end() || member->second.queue.empty()) return nullptr;
    return &member->second.queue.front();
  };
  auto pop = [&](uint32_t rank) { members_[handles[rank]].queue.pop_front(); };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (uint32_t rank = 0; rank < handles.size(); ++rank) {
      Pending* op = front(rank);
      if (op == nullptr || op->request.collective() == v1::RECV) continue;
      if (op->request.collective() == v1::SEND) {
        const uint32_t peer = op->request.peer();
        Pending* recv = front(peer);
        if (recv == nullptr || recv->request.collective() != v1::RECV ||
            recv->request.peer() != rank || recv->request.tag() != op->request.tag()) {
          continue;
        }
        std::memcpy(recv->recv, op->send,
                    std::min(op->request.send().length(), recv->request.recv().length()));
        Complete(*op, grpc::StatusCode::OK, "");
        Complete(*recv, grpc::StatusCode::OK, "");
        pop(rank);
        pop(peer);
        progressed = true;
        continue;
      }
      std::vector<Pending*> parties;
      for (uint32_t party = 0; party < handles.size(); ++party) {
        Pending* next = front(party);
        if (next == nullptr || next->request.collective() != op->request.collective()) break;
        parties.push_back(next);
      }
      if (parties.size() < handles.size()) continue;
      RunCollective(parties);
      for (uint32_t party = 0; party < handles.size(); ++party) pop(party);
      progressed = true;
    }
  }
}

void FakeClientService::RunCollective(const std::vector<Pending*>& parties) {
  const v1::SubmitRequest& first = parties[0]->request;
  if (first.collective() == v1::BCAST) {
    const Pending& root = *parties[first.root()];
    for (const auto& party : parties) {
      if (party->recv != root.recv) {
        std::memcpy(party->recv, root.recv, root.request.recv().length());
      }
    }
  } else {
    const uint64_t bytes = first.send().length();
    std::vector<uint8_t> result(parties[0]->send, parties[0]->send + bytes);
    for (size_t rank = 1; rank < parties.size(); ++rank) {
      const uint8_t* in = parties[rank]->send;
      switch (first.datatype()) {
        case v1::INT32:
          ReduceBytes<int32_t>(first.reduce_op(), result.data(), in, bytes);
          break;
        case v1::INT64:
          ReduceBytes<int64_t>(first.reduce_op(), result.data(), in, bytes);
          break;
        case v1::FLOAT64:
          ReduceBytes<double>(first.reduce_op(), result.data(), in, bytes);
          break;
        default:
          ReduceBytes<float>(first.reduce_op(), result.data(), in, bytes);
      }
    }
    if (corrupt_allreduce_ && first.count() > 3) result[3 * (bytes / first.count())] ^= 1;
    for (const auto& party : parties) std::memcpy(party->recv, result.data(), bytes);
  }
  for (const auto& party : parties) Complete(*party, grpc::StatusCode::OK, "");
}

void FakeClientService::Complete(const Pending& pending, grpc::StatusCode code,
                                 const std::string& message) {
  OpResult& result = ops_[pending.op_id];
  result.done = true;
  result.code = code;
  result.message = message;
  result.algorithm = pending.request.algorithm().empty() ? "fake" : pending.request.algorithm();
  changed_.SignalAll();
}

grpc::Status FakeClientService::Wait(grpc::ServerContext* context, const v1::WaitRequest* request,
                                     v1::WaitResponse* response) {
  absl::MutexLock lock(&mutex_);
  absl::StatusOr<std::string> session = Session(context);
  if (!session.ok()) return ToGrpc(session.status());
  auto op = ops_.find(request->op_id());
  if (op == ops_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no op ", request->op_id()));
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(request->timeout_ms());
  while (!op->second.done && !changed_.WaitWithDeadline(&mutex_, deadline)) {
  }
  if (!op->second.done) return grpc::Status::OK;
  response->set_done(true);
  response->set_code(op->second.code);
  response->set_message(op->second.message);
  response->set_algorithm(op->second.algorithm);
  response->set_elapsed_us(1);
  ops_.erase(op);
  return grpc::Status::OK;
}

}  // namespace cclo::testing
