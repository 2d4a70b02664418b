// A client session spoken by hand (attach frames + raw gRPC stubs), so tests can send
// requests that libcclo would never build.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "cclo/v1/client.grpc.pb.h"

namespace cclo::testing {

class RawSession {
 public:
  /// Attaches to the daemon in `runtime_dir`; aborts the test process on failure.
  explicit RawSession(const std::string& runtime_dir);
  ~RawSession();

  /// A context carrying the session token and a 30 s deadline.
  std::unique_ptr<grpc::ClientContext> Context() const;
  cclo::v1::Client::Stub& stub() { return *stub_; }

  /// AllocBuffer plus the fd frame that follows it; returns the buffer id.
  uint64_t Alloc(uint64_t bytes);

 private:
  int attach_fd_ = -1;
  std::string token_;
  std::unique_ptr<cclo::v1::Client::Stub> stub_;
};

}  // namespace cclo::testing
