// The Client service of FakeDaemon (see fake_daemon.h): sessions, memfd buffers sent over
// the attach socket, communicators, and ops run in memory.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cclo/v1/client.grpc.pb.h"

namespace cclo::testing {

class FakeClientService final : public v1::Client::Service {
 public:
  explicit FakeClientService(bool corrupt_allreduce) : corrupt_allreduce_(corrupt_allreduce) {}
  ~FakeClientService() override;

  /// Registers a session attached on `attach_fd` (owned from now); returns its token.
  std::string AddSession(uint64_t id, int attach_fd);
  std::string last_token() const;
  size_t buffer_count() const;

  grpc::Status AllocBuffer(grpc::ServerContext* context, const v1::AllocBufferRequest* request,
                           v1::AllocBufferResponse* response) override;
  grpc::Status FreeBuffer(grpc::ServerContext* context, const v1::FreeBufferRequest* request,
                          v1::FreeBufferResponse* response) override;
  grpc::Status CreateCommunicatorId(grpc::ServerContext* context,
                                    const v1::CreateCommunicatorIdRequest* request,
                                    v1::CreateCommunicatorIdResponse* response) override;
  grpc::Status JoinCommunicator(grpc::ServerContext* context,
                                const v1::JoinCommunicatorRequest* request,
                                v1::JoinCommunicatorResponse* response) override;
  grpc::Status DestroyCommunicator(grpc::ServerContext* context,
                                   const v1::DestroyCommunicatorRequest* request,
                                   v1::DestroyCommunicatorResponse* response) override;
  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                      v1::SubmitResponse* response) override;
  grpc::Status Wait(grpc::ServerContext* context, const v1::WaitRequest* request,
                    v1::WaitResponse* response) override;

 private:
  struct MappedBuffer {
    std::string session;
    uint8_t* data;
    uint64_t bytes;
  };
  // A submitted op with its buffer ranges resolved.
  struct Pending {
    uint64_t op_id;
    v1::SubmitRequest request;
    uint8_t* send = nullptr;
    uint8_t* recv = nullptr;
  };
  struct Member {
    std::string comm_token;
    uint32_t rank;
    std::deque<Pending> queue;  // ops not yet run, in submission order; the front runs next
  };
  struct Comm {
    uint32_t size = 0;  // 0 until the first join
    uint32_t joined = 0;
    std::vector<uint64_t> handles;  // member handle by rank
  };
  struct OpResult {
    bool done = false;
    grpc::StatusCode code = grpc::StatusCode::OK;
    std::string message;
    std::string algorithm;
  };

  // The session token of the caller, or UNAUTHENTICATED.
  absl::StatusOr<std::string> Session(grpc::ServerContext* context)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Start of `ref` in a buffer of `session`, after checking ownership and bounds.
  absl::StatusOr<uint8_t*> Resolve(const std::string& session, const v1::BufferRef& ref)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Runs every op of the communicator whose parties are all at the front of their queues.
  void Progress(const std::string& comm_token) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void RunCollective(const std::vector<Pending*>& parties) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Complete(const Pending& pending, grpc::StatusCode code, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const bool corrupt_allreduce_;
  mutable absl::Mutex mutex_;
  absl::CondVar changed_;  // signalled when a join or an op completes
  std::map<std::string, int> sessions_ ABSL_GUARDED_BY(mutex_);  // token -> attach fd (owned)
  std::string last_token_ ABSL_GUARDED_BY(mutex_);
  std::map<uint64_t, MappedBuffer> buffers_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, Comm> comms_ ABSL_GUARDED_BY(mutex_);
  std::map<uint64_t, Member> members_ ABSL_GUARDED_BY(mutex_);  // by handle
  std::map<uint64_t, OpResult> ops_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_id_ ABSL_GUARDED_BY(mutex_) = 1;  // buffers, comms, handles, ops
};

}  // namespace cclo::testing
