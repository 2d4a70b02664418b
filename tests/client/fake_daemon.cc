#include "tests/client/fake_daemon.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "cclo/v1/attach.h"
#include "tests/client/fake_client_service.h"

namespace cclo::testing {
namespace {

std::unique_ptr<grpc::Server> Serve(const std::string& path, grpc::Service* service) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", path), grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

// Setup of the fake must not fail quietly: a test would then hang or mislead.
void Check(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::abort();
  }
}

}  // namespace

FakeDaemon::FakeDaemon(Options options)
    : options_(std::move(options)),
      client_(std::make_unique<FakeClientService>(options_.corrupt_allreduce)) {
  char dir[] = "/tmp/cclo.XXXXXX";
  Check(mkdtemp(dir) != nullptr, "mkdtemp");
  runtime_dir_ = dir;
  const std::string attach_path = runtime_dir_ + "/attach.sock";
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, attach_path.c_str(), sizeof(address.sun_path) - 1);
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  Check(listen_fd_ >= 0, "socket");
  Check(bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0,
        "bind attach.sock");
  Check(listen(listen_fd_, 16) == 0, "listen");
  Check(pipe(stop_pipe_) == 0, "pipe");
  client_server_ = Serve(runtime_dir_ + "/client.sock", client_.get());
  admin_server_ = Serve(runtime_dir_ + "/admin.sock", &admin_);
  Check(client_server_ != nullptr && admin_server_ != nullptr, "gRPC servers");
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

FakeDaemon::~FakeDaemon() {
  Check(write(stop_pipe_[1], "x", 1) == 1, "stop pipe");
  accept_thread_.join();
  client_server_->Shutdown(std::chrono::system_clock::now());
  admin_server_->Shutdown(std::chrono::system_clock::now());
  close(listen_fd_);
  close(stop_pipe_[0]);
  close(stop_pipe_[1]);
  std::filesystem::remove_all(runtime_dir_);
}

std::string FakeDaemon::last_token() const { return client_->last_token(); }

size_t FakeDaemon::buffer_count() const { return client_->buffer_count(); }

void FakeDaemon::AcceptLoop() {
  uint64_t next_session = 1;
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 || fds[1].revents != 0) return;
    int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    absl::StatusOr<attach::Received> hello =
        attach::ReceiveFrame(connection, absl::Now() + absl::Seconds(10));
    if (!hello.ok() || hello->frame.type != attach::FrameType::kHello) {
      close(connection);
      continue;
    }
    if (!options_.refuse_reason.empty()) {
      attach::Frame refused;
      refused.type = attach::FrameType::kRefused;
      refused.text = options_.refuse_reason;
      attach::SendFrame(connection, refused).IgnoreError();  // the client may be gone
      close(connection);
      continue;
    }
    const uint64_t id = next_session++;
    const std::string token = client_->AddSession(id, connection);
    attach::Frame welcome;
    welcome.type = attach::FrameType::kWelcome;
    welcome.id = id;
    welcome.text = token;
    attach::SendFrame(connection, welcome).IgnoreError();  // the client may be gone
  }
}

}  // namespace cclo::testing
