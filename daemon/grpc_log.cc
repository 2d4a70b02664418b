#include "daemon/grpc_log.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>

#include <string>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

ABSL_CONST_INIT absl::Mutex listener_mu(absl::kConstInit);
/// OnListenerStopped's; never destroyed, as gRPC may log while the process exits.
std::function<void(const std::string&)>& ListenerStoppedCall() {
  static auto* stopped = new std::function<void(const std::string&)>;
  return *stopped;
}

/// The file name in a source path, for the log.
std::string BaseName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

void Forward(gpr_log_func_args* args) {
  const std::string file = args->file;
  const std::string message = args->message;
  const std::string handshake_failed = "Handshaking failed: ";
  if (message.rfind(handshake_failed, 0) == 0) {
    // gRPC appends the error's creation time and source location after " {".
    spdlog::warn(
        "TLS handshake on the peer port failed: a peer daemon refused this "
        "daemon's certificate, or presented none that chains to peer_tls_ca_file, or "
        "speaks no TLS (gRPC: {})",
        message.substr(handshake_failed.size(), message.find(" {") - handshake_failed.size()));
    return;
  }
  const spdlog::level::level_enum level =
      args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
      : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::debug
                                                : spdlog::level::trace;
  spdlog::log(level, "grpc: {}:{}: {}", BaseName(file), args->line, message);
  const std::string accept_failed = "Failed accept4: ";
  if (message.rfind(accept_failed, 0) == 0) {
    absl::MutexLock lock(&listener_mu);
    if (ListenerStoppedCall()) ListenerStoppedCall()(message.substr(accept_failed.size()));
  }
}

/// Protobuf logs what it refuses to parse, e.g. a string field that is not UTF-8 in a
/// request from another process.
void ForwardProtobuf(google::protobuf::LogLevel level, const char* file, int line,
                     const std::string& message) {
  spdlog::log(level == google::protobuf::LOGLEVEL_INFO      ? spdlog::level::info
              : level == google::protobuf::LOGLEVEL_WARNING ? spdlog::level::warn
                                                            : spdlog::level::err,
              "protobuf: {}:{}: {}", BaseName(file), line, message);
}

/// Protobuf's own handler (its stderr lines), given back at the end.
google::protobuf::LogHandler* protobuf_handler = nullptr;

}  // namespace

void ForwardGrpcLogs() {
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
  gpr_set_log_function(Forward);
  protobuf_handler = google::protobuf::SetLogHandler(ForwardProtobuf);
}

void OnListenerStopped(std::function<void(const std::string& reason)> stopped) {
  absl::MutexLock lock(&listener_mu);
  ListenerStoppedCall() = std::move(stopped);
}

void StopForwardingGrpcLogs() {
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
  gpr_set_log_function(nullptr);
  google::protobuf::SetLogHandler(protobuf_handler);
}

}  // namespace cclo::daemon
