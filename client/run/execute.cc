#include "client/run/execute.h"

#include <utility>

namespace cclo::run {
namespace {

constexpr uint32_t kSendRecvTag = 1;

}  // namespace

absl::Status Submit(Communicator& comm, const OpShape& shape, OpOptions options, Buffer& send,
                    Buffer& recv, std::vector<Request>& requests) {
  options.in_place = shape.in_place;
  const uint64_t count = shape.count;
  const hw::DataType type = shape.datatype;
  const hw::ReduceOp reduce = shape.reduce_op;
  auto keep = [&requests](absl::StatusOr<Request> request) {
    if (!request.ok()) return request.status();
    requests.push_back(*std::move(request));
    return absl::OkStatus();
  };
  switch (shape.op) {
    case Op::kSendRecv: {
      options.in_place = false;
      const uint32_t next = (shape.rank + 1) % shape.size;
      const uint32_t previous = (shape.rank + shape.size - 1) % shape.size;
      // The receive first, so that the message meets a posted receive and lands in place;
      // sends and receives of a rank run side by side, so every exchange goes both ways.
      if (absl::Status received =
              keep(comm.RecvAsync(recv, 0, count, type, previous, kSendRecvTag, options));
          !received.ok()) {
        return received;
      }
      return keep(comm.SendAsync(send, 0, count, type, next, kSendRecvTag, options));
    }
    case Op::kBcast:
      return keep(comm.BcastAsync(recv, 0, count, type, shape.root, options));
    case Op::kScatter:
      return keep(comm.ScatterAsync(send, recv, count, type, shape.root, options));
    case Op::kGather:
      return keep(comm.GatherAsync(send, recv, count, type, shape.root, options));
    case Op::kAllgather:
      return keep(comm.AllgatherAsync(send, recv, count, type, options));
    case Op::kReduce:
      return keep(comm.ReduceAsync(send, recv, count, type, reduce, shape.root, options));
    case Op::kAllreduce:
      return keep(comm.AllreduceAsync(send, recv, count, type, reduce, options));
    case Op::kReduceScatter:
      return keep(comm.ReduceScatterAsync(send, recv, count, type, reduce, options));
    case Op::kAlltoall:
      return keep(comm.AlltoallAsync(send, recv, count, type, options));
    case Op::kBarrier:
      return keep(comm.BarrierAsync(options));
  }
  return absl::InternalError("unknown op");
}

absl::Status Execute(Communicator& comm, const OpShape& shape, OpOptions options, Buffer& send,
                     Buffer& recv) {
  std::vector<Request> requests;
  const absl::Status submitted = Submit(comm, shape, std::move(options), send, recv, requests);
  // Every request is waited for, also those before a refusal: a sendrecv's receive may be
  // at the engine already, where Request::Cancel cannot withdraw it, and must not write into
  // `recv` or take a later message after this returns.
  absl::Status done;
  for (Request& request : requests) {
    absl::Status status = request.Wait();
    if (done.ok()) done = std::move(status);
  }
  return submitted.ok() ? done : submitted;
}

}  // namespace cclo::run
