// An in-process stand-in for cclod, for testing libcclo, ccloctl and cclo-run without the
// daemon: attach.sock speaks the attach protocol, client.sock serves the Client service and
// admin.sock the Admin service, all in a fresh runtime directory under /tmp.
//
// Its Client service runs ops in memory, as strictly as the hw::Device contract allows: the
// ops of one (communicator, rank) run one at a time in submission order, a send/recv pair
// runs when both are at the front of their ranks' queues (no eager buffering), a collective
// when all ranks have it at the front. Send/recv to the calling rank itself is refused, as
// cclod does. Allreduce supports int32, int64, float32 and
// float64 with sum, max and min. An op submitted with algorithm "fail" fails with ABORTED.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "cclo/v1/admin.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace cclo::testing {

class FakeClientService;

class FakeDaemon {
 public:
  struct Options {
    /// When set, attach is refused with this reason.
    std::string refuse_reason;
    /// Adds 1 to element 3 of every allreduce result, to test mismatch reporting.
    bool corrupt_allreduce = false;
  };

  explicit FakeDaemon(Options options);
  FakeDaemon() : FakeDaemon(Options{}) {}
  ~FakeDaemon();

  /// Directory holding attach.sock, client.sock and admin.sock.
  const std::string& runtime_dir() const { return runtime_dir_; }

  /// What Admin.Status and Admin.ListCommunicators answer; set before calling them.
  v1::StatusResponse& status() { return admin_.status; }
  v1::ListCommunicatorsResponse& communicators() { return admin_.communicators; }

  /// The `cclo-session` token of the most recent attach.
  std::string last_token() const;
  /// Number of buffers currently allocated.
  size_t buffer_count() const;

 private:
  struct AdminService final : v1::Admin::Service {
    grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*,
                        v1::StatusResponse* response) override {
      *response = status;
      return grpc::Status::OK;
    }
    grpc::Status ListCommunicators(grpc::ServerContext*, const v1::ListCommunicatorsRequest*,
                                   v1::ListCommunicatorsResponse* response) override {
      *response = communicators;
      return grpc::Status::OK;
    }
    v1::StatusResponse status;
    v1::ListCommunicatorsResponse communicators;
  };

  // Accepts attach connections until stop_pipe_ is written.
  void AcceptLoop();

  Options options_;
  std::string runtime_dir_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::unique_ptr<FakeClientService> client_;
  AdminService admin_;
  std::unique_ptr<grpc::Server> client_server_;
  std::unique_ptr<grpc::Server> admin_server_;
  std::thread accept_thread_;
};

}  // namespace cclo::testing
