// The buffer contract of every collective: how many elements each of the call's three
// buffers must hold, so that the daemon can check buffer bounds before it generates and
// runs a program. Every algorithm of a collective stays inside these bounds (the verifier
// runs each one on buffers of exactly this size).
//
// With n = count and P = world size (MPI's meaning of count in each case):
//   send            op0 n                        recv           result n
//   bcast           result n (root: the input)   barrier, nop   nothing
//   scatter         root: op0 P*n (chunk i for rank i); every rank: result n
//   gather          op0 n; root: result P*n (chunk i from rank i)
//   allgather       op0 n; result P*n
//   reduce          op0 n; root: result n
//   allreduce       op0 n; result n
//   reduce_scatter  op0 P*n (chunk i reduced onto rank i); result n
//   alltoall        op0 P*n (chunk i for rank i); result P*n (chunk i from rank i)
// In place (CallDescriptor::in_place; rooted collectives at the root only) op0 is unused
// and the input sits in result:
//   scatter         result P*n holds every chunk; the root's own chunk stays where it is
//   gather          result P*n; the root's contribution is already at chunk `root`
//   allgather       result P*n; this rank's contribution is already at chunk `rank`
//   reduce          result n holds the root's contribution
//   allreduce       result n holds the contribution
//   reduce_scatter  result P*n holds the input; the output goes to its first n elements
//   alltoall        result P*n holds the input chunks and receives the output
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "hw/call.h"
#include "hw/program.h"

namespace cclo::firmware {

/// Elements of the call's datatype that buffer `slot` (op0, op1 or result) of the calling
/// rank must hold; 0 for a slot the call does not use. Saturates at UINT64_MAX.
uint64_t RequiredElements(const hw::CallDescriptor& call, uint32_t world_size, hw::Slot slot);

/// RequiredElements in bytes of the call's datatype (a valid one), or INVALID_ARGUMENT
/// "count N of T overflows a byte length" (with " times P ranks" for a buffer of a chunk per
/// rank) where that is past 2^64 - 1.
absl::StatusOr<uint64_t> RequiredBytes(const hw::CallDescriptor& call, uint32_t world_size,
                                       hw::Slot slot);

}  // namespace cclo::firmware
