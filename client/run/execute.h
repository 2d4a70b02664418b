// Runs one op of cclo-run's set on a communicator, with the buffers the reference fills.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "cclo/communicator.h"
#include "client/run/check.h"

namespace cclo::run {

/// Runs the op of `shape` once on `comm` (rooted ops at shape.root, in place when
/// shape.in_place) with `send` and `recv` laid out as FillBuffers leaves them, and waits
/// for it. `options` applies to every op submitted (sendrecv submits two); its in_place is
/// replaced by shape.in_place. Sendrecv is a ring exchange: each rank posts a receive from
/// rank - 1, then a send to rank + 1, and waits for both; when the send is refused, it
/// waits for the receive (until rank - 1's message or its deadline) and returns the refusal.
absl::Status Execute(Communicator& comm, const OpShape& shape, OpOptions options, Buffer& send,
                     Buffer& recv);

/// Submits the op of `shape` as Execute runs it, without waiting: the requests it made go to
/// `requests` (sendrecv: the receive, then the send), also those made before a submission
/// that was refused, whose refusal it returns.
absl::Status Submit(Communicator& comm, const OpShape& shape, OpOptions options, Buffer& send,
                    Buffer& recv, std::vector<Request>& requests);

}  // namespace cclo::run
