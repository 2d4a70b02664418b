// Value types shared by the daemon, the device and the firmware: datatypes, reduce
// operations, collectives and communicator identity.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace cclo::hw {

/// Element types a call may carry. Values are part of the wire and RPC contract.
enum class DataType : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat16 = 4,
  kBfloat16 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
};

/// Elementwise reduction applied by reduce moves.
enum class ReduceOp : uint8_t {
  kSum = 0,
  kProd = 1,
  kMax = 2,
  kMin = 3,
};

/// The operations a call may request of the engine.
enum class Collective : uint8_t {
  kNop = 0,
  kSend = 1,
  kRecv = 2,
  kBcast = 3,
  kAllreduce = 4,
  kScatter = 5,
  kGather = 6,
  kAllgather = 7,
  kReduce = 8,
  kReduceScatter = 9,
  kAlltoall = 10,
  kBarrier = 11,
};

/// How a call's messages to other engines go (DESIGN 7). Values are part of the RPC contract.
enum class Protocol : uint8_t {
  /// Eager when the message fits the receiver's eager size and a credit is there (one
  /// segment, no round trip); rendezvous otherwise.
  kEager = 0,
  /// Always rendezvous: the data goes once the receive is posted.
  kRendezvous = 1,
};

/// The largest Collective value.
inline constexpr Collective kLastCollective = Collective::kBarrier;

/// True for the collectives that have a root rank (bcast, scatter, gather, reduce).
bool HasRoot(Collective collective);
/// True for the collectives that reduce (reduce, allreduce, reduce_scatter).
bool Reduces(Collective collective);
/// True for the collectives that have an MPI_IN_PLACE variant (see CallDescriptor).
bool HasInPlace(Collective collective);

/// What every rank of one collective call must pass alike beyond its count (which the
/// message sizes check), and the algorithm it runs: the first segment of each message
/// carries its sender's (wire.h), so that a receiver refuses a message of another call, or
/// of another algorithm, instead of taking its data. Fields the collective does not use
/// are 0; every point-to-point message carries kSend.
struct CallSignature {
  Collective collective = Collective::kNop;
  DataType datatype = DataType::kInt8;
  ReduceOp reduce_op = ReduceOp::kSum;
  /// The algorithm's place in its collective's table (firmware/registry.h), from 1; 0 for
  /// point-to-point and nop, which have no choice.
  uint8_t algorithm = 0;
  uint32_t root = 0;

  bool operator==(const CallSignature&) const = default;
};

/// `signature` as every call makes it: the fields its collective does not use 0, and
/// point-to-point (recv too) as kSend.
CallSignature Canonical(const CallSignature& signature);

/// "bcast of float32 from root 1", "allreduce of float32 (sum)", "send/recv", "barrier".
std::string DescribeSignature(const CallSignature& signature);

/// Size in bytes of one element of `type`.
size_t DataTypeSize(DataType type);
/// Lower-case name, e.g. "float32".
std::string_view DataTypeName(DataType type);

std::string_view ReduceOpName(ReduceOp op);

std::string_view CollectiveName(Collective collective);

/// The collective named `name` (nop is none: it moves nothing); INVALID_ARGUMENT
/// "'<name>' is not one of send, recv, ..." otherwise.
absl::StatusOr<Collective> ParseCollective(std::string_view name);

/// The datatype named `name`; INVALID_ARGUMENT "'<name>' is not one of int8, ..." otherwise.
absl::StatusOr<DataType> ParseDataType(std::string_view name);

/// "eager" or "rendezvous".
std::string_view ProtocolName(Protocol protocol);

/// Parses a byte size: decimal digits with an optional K, M or G suffix (powers of 1024).
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

/// 128-bit communicator id, unique per communicator across the cluster.
using CommId = std::array<uint8_t, 16>;
/// 256-bit communicator secret; proves membership (HMAC key). Never logged.
using CommSecret = std::array<uint8_t, 32>;

/// Lower-case hex of a communicator id, for logs and tables.
std::string CommIdHex(const CommId& id);

/// Length of the well-formed multi-byte UTF-8 sequence that `text` (not empty) starts with,
/// or 0 (an ASCII byte too): no overlong forms, no surrogates, nothing past U+10FFFF
/// (Unicode's table 3-7).
size_t Utf8Length(std::string_view text);

/// OK when `text` is UTF-8, as every text an RPC carries must be: protobuf does not send
/// other bytes, and the call then fails with no reason. Otherwise INVALID_ARGUMENT naming
/// the first byte that is not: "is not UTF-8 text (byte 0xff at offset 3)".
absl::Status CheckUtf8(std::string_view text);

/// How much of a text from another process EscapeControl keeps unless told otherwise: more
/// than any address, name or reason a daemon sends, and a bound on what anyone who reaches
/// a port can put into one log line.
inline constexpr size_t kMaxEscapedBytes = 256;

/// `text` with each control character (below 0x20, and 0x7f) written as \n or \xHH, each
/// byte that is not part of a UTF-8 character as \xHH (so that the result is UTF-8, as a
/// proto's string field must be), and cut after `max_bytes` bytes (not inside a UTF-8
/// character) with "... (N bytes in all)": for text from another process or a file on its
/// way to a log, a terminal or an RPC, which may hold anything and be of any length.
std::string EscapeControl(std::string_view text, size_t max_bytes = kMaxEscapedBytes);

/// "host:port", an IPv6 address in brackets ("[::1]:7470"): the form gRPC, civetweb and the
/// data sessions parse.
std::string HostPort(const std::string& host, uint16_t port);
/// Whether `text` is printable ASCII without spaces, as a host in an address must be.
bool PrintableWithoutSpaces(std::string_view text);
/// Whether `address` (from another process) has that form: up to 300 printable characters
/// without spaces, then ':' and a port from 1 to 65535. INVALID_ARGUMENT saying why.
absl::Status CheckHostPort(std::string_view address);
/// The error of getaddrinfo's `rc` (not 0) for `host`, "cannot resolve '<host>': <why>":
/// UNAVAILABLE where the resolver fails for now, no fault of the name (a later try may
/// pass), else INVALID_ARGUMENT.
absl::Status ResolveFailure(const std::string& host, int rc);

/// Most bytes ReadTextFile reads: a config, policy or PEM file is far smaller.
inline constexpr size_t kMaxTextFileBytes = 4u << 20;

/// The whole text of the regular file at `path`, or NOT_FOUND "cannot read <what> <path>:
/// <reason>" ("config file", say). A directory is an error (std::ifstream reads one as
/// empty), and so are a device, a FIFO or a socket (/dev/zero never ends, a FIFO may never
/// answer) and a file longer than kMaxTextFileBytes.
absl::StatusOr<std::string> ReadTextFile(const std::string& what, const std::string& path);

/// How long accepting on a listening socket pauses after an accept failed (the queued
/// connection keeps the socket readable: polling it would spin).
inline constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);
/// Whether an accept that failed with `error` pauses accepting for kAcceptBackoff: all but
/// EINTR, ECONNABORTED (that connection gone) and EAGAIN. Out of descriptors or memory
/// (EMFILE, ENFILE, ENOBUFS, ENOMEM), or refused for good (a security module's EPERM), the
/// connection stays queued.
bool PausesAccepting(int error);

/// Starts `run` on `thread`, or UNAVAILABLE "cannot start a thread for <what>: <why>" where
/// none is to be had (the user's process limit, the cgroup's task limit), which a later start
/// may pass: std::thread throws then, and uncaught that ended the process (SIGABRT).
absl::Status StartThread(std::thread& thread, const std::string& what, std::function<void()> run);

}  // namespace cclo::hw
