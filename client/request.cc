#include "cclo/request.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/session.h"

namespace cclo {

Request& Request::operator=(Request&& other) noexcept {
  if (this == &other) return *this;
  if (session_) session_->ring().Forget(cookie_);
  session_ = std::move(other.session_);
  // `other` holds no op from here on (request.h).
  op_id_ = std::exchange(other.op_id_, 0);
  cookie_ = std::exchange(other.cookie_, 0);
  report_by_ = other.report_by_;
  record_mu_ = std::move(other.record_mu_);
  done_.store(other.done_.exchange(false, std::memory_order_acquire), std::memory_order_release);
  status_ = std::move(other.status_);
  algorithm_ = std::move(other.algorithm_);
  elapsed_ = other.elapsed_;
  protocol_ = std::move(other.protocol_);
  segment_bytes_ = other.segment_bytes_;
  chosen_by_ = std::move(other.chosen_by_);
  policy_version_ = other.policy_version_;
  return *this;
}

Request::~Request() {
  // Also once done: the ring keeps a collected result for this request's other waiters.
  if (session_) session_->ring().Forget(cookie_);
}

absl::Status Request::Poll(hw::SteadyTime deadline) {
  absl::StatusOr<std::optional<ring::CompletionSlot>> response =
      session_->ring().Finished(cookie_, deadline);
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat("Wait: ", response.status().message()));
  }
  if (response->has_value()) {
    absl::MutexLock lock(record_mu_.get());
    if (done_.load(std::memory_order_relaxed)) return absl::OkStatus();  // another waiter did
    const ring::CompletionSlot& result = **response;
    status_ = absl::Status(static_cast<absl::StatusCode>(result.code),
                           ring::GetText(result.message, ring::kMessageBytes));
    algorithm_ = ring::GetText(result.algorithm, ring::kAlgorithmBytes);
    elapsed_ = absl::Microseconds(result.elapsed_us);
    protocol_ = ring::GetText(result.protocol, ring::kProtocolBytes);
    segment_bytes_ = result.segment_bytes;
    chosen_by_ = ring::GetText(result.chosen_by, ring::kChosenByBytes);
    policy_version_ = result.policy_version;
    done_.store(true, std::memory_order_release);
  }
  return absl::OkStatus();
}

absl::Status Request::Wait() { return Wait(absl::InfiniteDuration()); }

absl::Status Request::Unreported() const {
  return absl::DeadlineExceededError(
      absl::StrCat("daemon did not report op ", op_id_, " done by its deadline (plus ",
                   absl::FormatDuration(kReportGrace), "); it may be stuck"));
}

absl::Status Request::MovedFrom() const {
  return absl::FailedPreconditionError("this Request was moved from");
}

absl::StatusOr<hw::SteadyTime> Request::ReportBy() {
  // Asked before the look below, which then finds what the daemon posted until it said so.
  const hw::SteadyTime held_until = session_->ring().HeldUntil(kReportGrace);
  if (absl::Status polled = Poll(hw::SteadyTime::InfinitePast()); !polled.ok()) return polled;
  return std::max(report_by_, held_until);
}

absl::Status Request::Wait(absl::Duration timeout) {
  if (!session_) return MovedFrom();
  const hw::SteadyTime deadline = hw::SteadyNow() + timeout;
  hw::SteadyTime report_by = report_by_;
  while (!done()) {
    if (absl::Status polled = Poll(std::min(deadline, report_by)); !polled.ok()) return polled;
    if (done()) break;
    if (hw::SteadyNow() >= report_by) {
      absl::StatusOr<hw::SteadyTime> later = ReportBy();
      if (!later.ok()) return later.status();
      if (done()) break;
      report_by = *later;
      if (hw::SteadyNow() >= report_by) return Unreported();
    }
    if (hw::SteadyNow() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("op ", op_id_, " still running after ", absl::FormatDuration(timeout)));
    }
  }
  return status_;
}

absl::StatusOr<bool> Request::Test() {
  if (!session_) return MovedFrom();
  if (!done()) {
    if (absl::Status polled = Poll(hw::SteadyTime::InfinitePast()); !polled.ok()) return polled;
  }
  if (!done() && hw::SteadyNow() >= report_by_) {
    absl::StatusOr<hw::SteadyTime> report_by = ReportBy();
    if (!report_by.ok()) return report_by.status();
    if (!done() && hw::SteadyNow() >= *report_by) return Unreported();
  }
  if (!done()) return false;
  if (!status_.ok()) return status_;
  return true;
}

absl::Status Request::Cancel() {
  if (!session_) return MovedFrom();
  if (absl::Status open = session_->ring().CheckOpen(); !open.ok()) return open;
  if (done()) {
    return absl::FailedPreconditionError(absl::StrCat("op ", op_id_, " already finished"));
  }
  v1::CancelRequest request;
  request.set_op_id(op_id_);
  v1::CancelResponse response;
  grpc::ClientContext context;
  session_->Prepare(context, session_->rpc_timeout());
  return session_->FromGrpc(session_->stub().Cancel(&context, request, &response), "Cancel");
}

}  // namespace cclo
