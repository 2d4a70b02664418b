// The command and completion rings, version 2: one sealed memfd per session, shared by the
// client (libcclo) and cclod, sent with the WELCOME attach frame together with two doorbells:
// the command doorbell, client -> daemon, an eventfd the client writes 1 to; and the
// completion doorbell, daemon -> client, the read end of a pipe the daemon writes a byte to
// (its write end stays in the daemon, so no client can make the daemon's ring block).
// Version 1 had an eventfd for both.
//
//   offset 0      RingHeader: magic, version, slot counts, then each index and flag on its
//                 own cache line (the count of completions held shares the completion
//                 head's: the daemon writes both)
//   header end    CommandSlot[kCommandSlots]        client produces, daemon consumes
//   after those   CompletionSlot[kCompletionSlots]  daemon produces, client consumes
//
// Indices count slots ever written and never wrap; slot i lives at i % capacity. Each ring
// has one producer and one consumer: the producer fills the slot, then publishes it with a
// release store of its head; the consumer reads head with acquire, copies the slot out and
// advances its tail with a release store. The daemon keeps completions that find the ring
// full until the client makes room, and says how many in `completions_held` (a release
// store after it posts any of them), so a client can tell a result still coming from one
// never reported. That field came within version 2, in completion_head's cache line: a
// daemon that does not set it leaves it 0. A producer rings the other side's doorbell only
// when that side said it is about to sleep (`daemon_sleeping`, `client_waiters`), checked
// after a seq_cst fence, and the sleeper checks the ring again after setting its flag, so
// no wake-up is lost.
//
// A SUBMIT command carries what a SubmitRequest carries; the daemon answers each with an
// ACCEPTED completion (its op id) or a REJECTED one (the Submit error), and each accepted op
// later with a FINISHED completion (what a WaitResponse carries). ACCEPTED and FINISHED of
// one op may arrive in either order. The daemon releases an OK op's result once the
// client's completion tail has passed it and every command the client posted before doing
// so was handled; a failed op's result stays until a RELEASE command names it (or the
// session ends). So `after` may name any op whose FINISHED completion the client had not
// consumed when it posted the command, and any failed op it has not released: the new op
// then ends ABORTED, as through the Submit RPC. RELEASE commands get no completion.
//
// Everything in the shared memory is untrusted by the daemon: it copies a slot out before
// it decodes it, keeps its own copies of the indices it owns, and checks the client's
// indices against the capacity.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cclo/v1/client.pb.h"

namespace cclo::ring {

inline constexpr uint32_t kMagic = 0x474e5243;  // "CRNG"
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kCommandSlots = 256;
inline constexpr uint32_t kCompletionSlots = 1024;
/// Most `after` ids a command carries; an op waiting for more is submitted through gRPC.
inline constexpr uint32_t kMaxAfter = 8;
/// Room for an algorithm name, its NUL included.
inline constexpr size_t kAlgorithmBytes = 32;
inline constexpr size_t kMessageBytes = 256;
inline constexpr size_t kProtocolBytes = 16;
inline constexpr size_t kChosenByBytes = 64;

/// The header at offset 0. Each index or flag sits on its own cache line (completions_held
/// shares completion_head's: the daemon writes both).
struct RingHeader {
  uint32_t magic;
  uint32_t version;
  uint32_t command_slots;
  uint32_t completion_slots;
  alignas(64) std::atomic<uint64_t> command_head;     ///< client: commands posted
  alignas(64) std::atomic<uint64_t> command_tail;     ///< daemon: commands taken
  alignas(64) std::atomic<uint64_t> completion_head;  ///< daemon: completions posted
  std::atomic<uint64_t> completions_held;             ///< daemon: completions waiting for room
  alignas(64) std::atomic<uint64_t> completion_tail;  ///< client: completions consumed
  /// Set by the daemon before it sleeps on the command doorbell.
  alignas(64) std::atomic<uint32_t> daemon_sleeping;
  /// Client threads about to sleep on the completion doorbell (for a completion or for
  /// room in the command ring).
  alignas(64) std::atomic<uint32_t> client_waiters;
};

/// A buffer range as in cclo.v1.BufferRef.
struct RingBufferRef {
  uint64_t buffer_id;
  uint64_t offset;
  uint64_t length;
};

enum class CommandKind : uint8_t {
  kSubmit = 0,   ///< submit an op: the fields of cclo.v1.SubmitRequest
  kRelease = 1,  ///< drop the results of the failed ops in `after` (collected by the client)
};

/// One command.
struct CommandSlot {
  uint64_t cookie;  ///< the client's key for the completions of this command
  uint64_t comm_handle;
  uint64_t count;
  int32_t collective;
  int32_t datatype;
  int32_t reduce_op;
  uint32_t root;
  uint32_t peer;
  uint32_t tag;
  uint32_t timeout_ms;
  uint8_t in_place;       ///< 0 or 1
  uint8_t wait_for_room;  ///< 0 or 1
  uint8_t kind;           ///< CommandKind
  uint8_t reserved;       ///< 0
  RingBufferRef send;
  RingBufferRef recv;
  uint32_t after_count;  ///< at most kMaxAfter
  uint32_t reserved2;    ///< 0
  uint64_t after[kMaxAfter];
  char algorithm[kAlgorithmBytes];  ///< NUL-terminated; empty: the policy chooses
};

enum class CompletionKind : uint32_t {
  kAccepted = 1,  ///< the command became op `op_id`
  kRejected = 2,  ///< the command was refused: `code`, `message`
  kFinished = 3,  ///< op `op_id` ended: the WaitResponse fields
};

/// One completion; the fields of cclo.v1.WaitResponse, with strings cut to their room.
struct CompletionSlot {
  uint64_t cookie;
  uint64_t op_id;
  uint32_t kind;        ///< CompletionKind
  int32_t code;         ///< gRPC status code
  uint64_t timeout_ms;  ///< ACCEPTED: the op's deadline, in ms from its submission
  uint64_t elapsed_us;
  uint64_t segment_bytes;
  uint64_t policy_version;
  char message[kMessageBytes];
  char algorithm[kAlgorithmBytes];
  char protocol[kProtocolBytes];
  char chosen_by[kChosenByBytes];
};

inline constexpr size_t kCommandsOffset = sizeof(RingHeader);
inline constexpr size_t kCompletionsOffset = kCommandsOffset + kCommandSlots * sizeof(CommandSlot);
/// Size of the rings' memfd.
inline constexpr size_t kRingBytes = kCompletionsOffset + kCompletionSlots * sizeof(CompletionSlot);

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(RingHeader) == 448 && offsetof(RingHeader, command_head) == 64 &&
                  offsetof(RingHeader, command_tail) == 128 &&
                  offsetof(RingHeader, completion_head) == 192 &&
                  offsetof(RingHeader, completions_held) == 200 &&
                  offsetof(RingHeader, completion_tail) == 256 &&
                  offsetof(RingHeader, daemon_sleeping) == 320 &&
                  offsetof(RingHeader, client_waiters) == 384,
              "ring header layout changed: bump kVersion");
static_assert(sizeof(CommandSlot) == 208, "command slot layout changed: bump kVersion");
static_assert(sizeof(CompletionSlot) == 424, "completion slot layout changed: bump kVersion");

/// The rings of a mapping of kRingBytes bytes.
inline RingHeader* Header(void* base) { return static_cast<RingHeader*>(base); }
inline CommandSlot* Commands(void* base) {
  return reinterpret_cast<CommandSlot*>(static_cast<char*>(base) + kCommandsOffset);
}
inline CompletionSlot* Completions(void* base) {
  return reinterpret_cast<CompletionSlot*>(static_cast<char*>(base) + kCompletionsOffset);
}

/// Whether `request` with `after_count` `after` ids fits a command slot: INVALID_ARGUMENT
/// for an algorithm name of kAlgorithmBytes or more, or more than kMaxAfter ids.
absl::Status CheckFits(const v1::SubmitRequest& request, size_t after_count);
/// Fills a command slot from `request`; CheckFits' error when it does not fit.
absl::Status EncodeCommand(const v1::SubmitRequest& request, uint64_t cookie, CommandSlot& slot);

/// A RELEASE command for `op_ids` (at most kMaxAfter).
CommandSlot EncodeRelease(const std::vector<uint64_t>& op_ids);

/// Whether a SUBMIT command slot (a private copy: the caller copied it out of the ring) is
/// one a client could have encoded. INVALID_ARGUMENT naming the field otherwise: another
/// kind, flags other than 0 or 1, nonzero reserved bytes, more than kMaxAfter ids, an
/// algorithm name without NUL. Range checks of the values are Submit's.
absl::Status CheckCommand(const CommandSlot& slot);
/// Copies `text` into a slot's text field of `size` bytes, NUL-terminated; a text longer
/// than `size - 1` bytes is cut to fit, never inside a UTF-8 character, and ends in "...".
/// (The Wait RPC gives an op's whole message; cclod's log has it too.)
void PutText(std::string_view text, char* out, size_t size);
/// The text of a slot's text field of `size` bytes: up to its first NUL, or all of it.
std::string GetText(const char* in, size_t size);

}  // namespace cclo::ring
