#include "daemon/grpc_log.h"

#include <grpc/support/log.h>

#include <string>

#include "spdlog/spdlog.h"

namespace cclo::daemon {
namespace {

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
  spdlog::log(level, "grpc: {}:{}: {}", file.substr(file.find_last_of('/') + 1), args->line,
              message);
}

}  // namespace

void ForwardGrpcLogs() {
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
  gpr_set_log_function(Forward);
}

void StopForwardingGrpcLogs() {
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
  gpr_set_log_function(nullptr);
}

}  // namespace cclo::daemon
