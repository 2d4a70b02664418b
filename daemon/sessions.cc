#include "daemon/sessions.h"

#include "absl/strings/str_cat.h"
#include "cclo/v1/attach.h"
#include "hw/crypto.h"

namespace cclo::daemon {

absl::Status Session::AddBuffer(SharedBufferPtr buffer) {
  absl::MutexLock send_lock(&send_mu_);
  if (closed()) return absl::UnavailableError("session is closing");
  attach::Frame frame{attach::FrameType::kBuffer, buffer->id(), buffer->bytes(), ""};
  if (absl::Status sent = attach::SendFrame(attach_fd_, frame, buffer->fd()); !sent.ok()) {
    return sent;
  }
  absl::MutexLock lock(&mu_);
  buffers_.emplace(buffer->id(), std::move(buffer));
  return absl::OkStatus();
}

absl::Status Session::RemoveBuffer(uint64_t buffer_id) {
  absl::MutexLock lock(&mu_);
  if (buffers_.erase(buffer_id) == 0) {
    return absl::NotFoundError(absl::StrCat("no buffer ", buffer_id, " in this session"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SharedBufferPtr> Session::FindBuffer(uint64_t buffer_id) const {
  absl::MutexLock lock(&mu_);
  auto found = buffers_.find(buffer_id);
  if (found == buffers_.end()) {
    return absl::NotFoundError(absl::StrCat("no buffer ", buffer_id, " in this session"));
  }
  return found->second;
}

uint64_t Session::BufferBytes() const {
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [id, buffer] : buffers_) total += buffer->bytes();
  return total;
}

size_t Session::BufferCount() const {
  absl::MutexLock lock(&mu_);
  return buffers_.size();
}

void Session::AddCommHandle(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  comm_handles_.insert(handle);
}

bool Session::RemoveCommHandle(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  return comm_handles_.erase(handle) > 0;
}

std::vector<uint64_t> Session::CommHandles() const {
  absl::MutexLock lock(&mu_);
  return {comm_handles_.begin(), comm_handles_.end()};
}

uint64_t Session::StartOp() {
  absl::MutexLock lock(&mu_);
  uint64_t id = next_op_id_++;
  ops_.emplace(id, std::nullopt);
  return id;
}

void Session::FinishOp(uint64_t op_id, OpResult result) {
  absl::MutexLock lock(&mu_);
  auto found = ops_.find(op_id);
  if (found != ops_.end()) found->second = std::move(result);
}

absl::StatusOr<std::optional<OpResult>> Session::WaitOp(uint64_t op_id,
                                                        absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto not_found = [op_id] {
    return absl::NotFoundError(absl::StrCat("no op ", op_id, " pending in this session"));
  };
  if (ops_.find(op_id) == ops_.end()) return not_found();
  // Look the op up afresh on every check: a concurrent Wait may collect and erase it.
  auto done = [this, op_id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    auto op = ops_.find(op_id);
    return closed_ || op == ops_.end() || op->second.has_value();
  };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  auto found = ops_.find(op_id);
  if (found == ops_.end()) return not_found();
  if (!found->second.has_value()) {
    if (closed_) return absl::UnavailableError("session is closing");
    return std::optional<OpResult>();
  }
  std::optional<OpResult> result = std::move(found->second);
  ops_.erase(found);
  return result;
}

void Session::Close() {
  absl::MutexLock send_lock(&send_mu_);  // no frame is being sent once this returns
  absl::MutexLock lock(&mu_);
  closed_ = true;
  buffers_.clear();
}

bool Session::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

SessionPtr SessionRegistry::Create(PeerCredentials credentials, int attach_fd) {
  uint8_t secret[32];
  hw::RandomBytes(secret, sizeof(secret));
  absl::MutexLock lock(&mu_);
  auto session = std::make_shared<Session>(next_id_++, hw::Hex(secret, sizeof(secret)),
                                           credentials, attach_fd);
  by_token_[session->token()] = session;
  by_id_[session->id()] = session;
  return session;
}

absl::StatusOr<SessionPtr> SessionRegistry::FindByToken(const std::string& token) const {
  absl::MutexLock lock(&mu_);
  auto found = by_token_.find(token);
  if (found == by_token_.end()) {
    return absl::UnauthenticatedError(
        "no live session for the cclo-session token; attach first (attach.sock)");
  }
  return found->second;
}

SessionPtr SessionRegistry::Remove(uint64_t session_id) {
  absl::MutexLock lock(&mu_);
  auto found = by_id_.find(session_id);
  if (found == by_id_.end()) return nullptr;
  SessionPtr session = found->second;
  by_id_.erase(found);
  by_token_.erase(session->token());
  return session;
}

std::vector<SessionPtr> SessionRegistry::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<SessionPtr> all;
  for (const auto& [id, session] : by_id_) all.push_back(session);
  return all;
}

}  // namespace cclo::daemon
