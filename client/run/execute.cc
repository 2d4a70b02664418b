#include "client/run/execute.h"

namespace cclo::run {
namespace {

constexpr uint32_t kSendRecvTag = 1;

absl::Status SendRecv(Communicator& comm, const OpShape& shape, const OpOptions& options,
                      Buffer& send_buffer, Buffer& recv_buffer) {
  const uint32_t next = (shape.rank + 1) % shape.size;
  const uint32_t previous = (shape.rank + shape.size - 1) % shape.size;
  // The receive first, so that the message meets a posted receive and lands in place;
  // sends and receives of a rank run side by side, so every exchange goes both ways at once.
  absl::StatusOr<Request> first =
      comm.RecvAsync(recv_buffer, 0, shape.count, shape.datatype, previous, kSendRecvTag, options);
  if (!first.ok()) return first.status();
  absl::StatusOr<Request> second =
      comm.SendAsync(send_buffer, 0, shape.count, shape.datatype, next, kSendRecvTag, options);
  if (!second.ok()) {
    // The receive may be at the engine already, where Request::Cancel cannot withdraw it:
    // wait until the message from `previous` or its deadline ends it, so that it does not
    // write into `recv_buffer` or take a later message after this returns.
    (void)first->Wait();
    return second.status();
  }
  absl::Status first_done = first->Wait();
  absl::Status second_done = second->Wait();
  return first_done.ok() ? second_done : first_done;
}

}  // namespace

absl::Status Execute(Communicator& comm, const OpShape& shape, OpOptions options, Buffer& send,
                     Buffer& recv) {
  options.in_place = shape.in_place;
  const uint64_t count = shape.count;
  const hw::DataType type = shape.datatype;
  const hw::ReduceOp reduce = shape.reduce_op;
  switch (shape.op) {
    case Op::kSendRecv:
      options.in_place = false;
      return SendRecv(comm, shape, options, send, recv);
    case Op::kBcast:
      return comm.Bcast(recv, 0, count, type, shape.root, options);
    case Op::kScatter:
      return comm.Scatter(send, recv, count, type, shape.root, options);
    case Op::kGather:
      return comm.Gather(send, recv, count, type, shape.root, options);
    case Op::kAllgather:
      return comm.Allgather(send, recv, count, type, options);
    case Op::kReduce:
      return comm.Reduce(send, recv, count, type, reduce, shape.root, options);
    case Op::kAllreduce:
      return comm.Allreduce(send, recv, count, type, reduce, options);
    case Op::kReduceScatter:
      return comm.ReduceScatter(send, recv, count, type, reduce, options);
    case Op::kAlltoall:
      return comm.Alltoall(send, recv, count, type, options);
    case Op::kBarrier:
      return comm.Barrier(options);
  }
  return absl::InternalError("unknown op");
}

}  // namespace cclo::run
