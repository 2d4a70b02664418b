#include "cclo/client.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "client/session.h"
#include "hw/clock.h"
#include "hw/types.h"

namespace cclo {

absl::StatusOr<std::unique_ptr<Client>> Client::Attach(const std::string& runtime_dir,
                                                       absl::Duration timeout) {
  absl::StatusOr<std::shared_ptr<client::Session>> session =
      client::Session::Open(runtime_dir, timeout);
  if (!session.ok()) return session.status();
  return std::unique_ptr<Client>(new Client(*std::move(session)));
}

Client::~Client() { session_->Close(); }

uint64_t Client::session_id() const { return session_->id(); }

namespace {

absl::Status FreeBufferId(client::Session& session, uint64_t buffer_id) {
  v1::FreeBufferRequest request;
  request.set_buffer_id(buffer_id);
  v1::FreeBufferResponse response;
  grpc::ClientContext context;
  session.Prepare(context, session.rpc_timeout());
  return session.FromGrpc(session.stub().FreeBuffer(&context, request, &response), "FreeBuffer");
}

// The AllocBuffer RPC, then the buffer's fd from the attach socket, mapped.
absl::StatusOr<Buffer> AllocateAndMap(client::Session& session, uint64_t bytes) {
  v1::AllocBufferRequest request;
  request.set_bytes(bytes);
  v1::AllocBufferResponse response;
  grpc::ClientContext context;
  session.Prepare(context, session.rpc_timeout());
  grpc::Status status = session.stub().AllocBuffer(&context, request, &response);
  if (!status.ok()) return session.FromGrpc(status, "AllocBuffer");
  // The daemon holds the buffer (and charges the quota for it) from here on: a buffer this
  // process cannot use is given back.
  auto give_back = [&](absl::Status why) {
    (void)FreeBufferId(session, response.buffer_id());
    return why;
  };
  absl::StatusOr<attach::Received> received =
      session.TakeBuffer(response.buffer_id(), hw::SteadyNow() + session.rpc_timeout());
  if (!received.ok()) return give_back(received.status());
  if (received->frame.bytes != response.bytes()) {
    close(received->fd);
    return give_back(absl::InternalError(
        absl::StrCat("buffer ", response.buffer_id(), ": the RPC says ", response.bytes(),
                     " bytes, the attach frame ", received->frame.bytes)));
  }
  absl::StatusOr<Buffer> buffer = Buffer::Map(response.buffer_id(), received->fd, response.bytes());
  close(received->fd);
  if (!buffer.ok()) return give_back(buffer.status());
  return buffer;
}

}  // namespace

absl::StatusOr<Buffer> Client::AllocBuffer(uint64_t bytes) {
  if (absl::Status here = session_->ring().InAttachingProcess(); !here.ok()) return here;
  const uint64_t allocation = session_->BeginAllocation();
  absl::StatusOr<Buffer> buffer = AllocateAndMap(*session_, bytes);
  // Buffers whose answers were lost (their callers' RPCs failed) are given back.
  for (uint64_t orphan : session_->EndAllocation(allocation)) {
    (void)FreeBufferId(*session_, orphan);
  }
  if (buffer.ok()) buffer->session_ = session_;
  return buffer;
}

absl::Status Client::FreeBuffer(Buffer&& buffer) {
  if (absl::Status here = session_->ring().InAttachingProcess(); !here.ok()) return here;
  if (absl::Status ours = buffer.CheckSession(session_); !ours.ok()) {
    return absl::Status(ours.code(), absl::StrCat("FreeBuffer: ", ours.message()));
  }
  absl::Status freed = FreeBufferId(*session_, buffer.id());
  if (freed.ok()) buffer = Buffer();  // unmaps it
  return freed;
}

absl::StatusOr<std::string> Client::CreateCommunicatorId(const std::string& label) {
  if (absl::Status here = session_->ring().InAttachingProcess(); !here.ok()) return here;
  if (absl::Status utf8 = hw::CheckUtf8(label); !utf8.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("CreateCommunicatorId: label ", utf8.message()));
  }
  v1::CreateCommunicatorIdRequest request;
  request.set_label(label);
  v1::CreateCommunicatorIdResponse response;
  grpc::ClientContext context;
  session_->Prepare(context, session_->rpc_timeout());
  grpc::Status status = session_->stub().CreateCommunicatorId(&context, request, &response);
  if (!status.ok()) return session_->FromGrpc(status, "CreateCommunicatorId");
  return response.token();
}

absl::StatusOr<std::unique_ptr<Communicator>> Client::Join(const std::string& token, uint32_t rank,
                                                           uint32_t size, absl::Duration timeout) {
  if (absl::Status here = session_->ring().InAttachingProcess(); !here.ok()) return here;
  if (absl::Status utf8 = hw::CheckUtf8(token); !utf8.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("JoinCommunicator: token ", utf8.message()));
  }
  v1::JoinCommunicatorRequest request;
  request.set_token(token);
  request.set_rank(rank);
  request.set_size(size);
  absl::StatusOr<uint32_t> timeout_ms = client::TimeoutMillis(timeout, "join");
  if (!timeout_ms.ok()) return timeout_ms.status();
  request.set_timeout_ms(*timeout_ms);
  v1::JoinCommunicatorResponse response;
  grpc::ClientContext context;
  session_->Prepare(context, timeout + session_->rpc_timeout());
  grpc::Status status = session_->stub().JoinCommunicator(&context, request, &response);
  if (!status.ok()) return session_->FromGrpc(status, "JoinCommunicator");
  return std::unique_ptr<Communicator>(
      new Communicator(session_, response.comm_handle(), rank, size, response.comm_id()));
}

}  // namespace cclo
