// The ring's codec on the daemon's side: a command slot becomes the same OpRequest as the
// SubmitRequest it was encoded from, bad slots are refused by name, and a FINISHED
// completion slot carries what the Wait RPC reports.
#include "daemon/op_request.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "daemon/ops.h"
#include "tests/fuzz/mutator.h"

namespace cclo::daemon {
namespace {

cclo::v1::SubmitRequest EveryField() {
  cclo::v1::SubmitRequest request;
  request.set_comm_handle(7);
  request.set_collective(cclo::v1::REDUCE);
  request.set_datatype(cclo::v1::FLOAT64);
  request.set_reduce_op(cclo::v1::MAX);
  request.set_root(3);
  request.set_peer(4);
  request.set_tag(5);
  request.set_count(1000);
  request.set_in_place(true);
  request.set_algorithm("binary_tree");
  request.mutable_send()->set_buffer_id(11);
  request.mutable_send()->set_offset(12);
  request.mutable_send()->set_length(13);
  request.mutable_recv()->set_buffer_id(21);
  request.mutable_recv()->set_offset(22);
  request.mutable_recv()->set_length(23);
  request.set_timeout_ms(250);
  request.set_wait_for_room(true);
  request.add_after(31);
  request.add_after(32);
  return request;
}

void ExpectSame(const OpRequest& a, const OpRequest& b) {
  EXPECT_EQ(a.comm_handle, b.comm_handle);
  EXPECT_EQ(a.collective, b.collective);
  EXPECT_EQ(a.datatype, b.datatype);
  EXPECT_EQ(a.reduce_op, b.reduce_op);
  EXPECT_EQ(a.root, b.root);
  EXPECT_EQ(a.peer, b.peer);
  EXPECT_EQ(a.tag, b.tag);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.in_place, b.in_place);
  EXPECT_EQ(a.algorithm, b.algorithm);
  for (auto [x, y] : {std::pair{a.send, b.send}, std::pair{a.recv, b.recv}}) {
    EXPECT_EQ(x.buffer_id, y.buffer_id);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.length, y.length);
  }
  EXPECT_EQ(a.timeout_ms, b.timeout_ms);
  EXPECT_EQ(a.wait_for_room, b.wait_for_room);
  EXPECT_EQ(a.after, b.after);
}

TEST(OpRequestTest, ACommandSlotBecomesTheRequestItWasEncodedFrom) {
  const cclo::v1::SubmitRequest request = EveryField();
  ring::CommandSlot slot;
  ASSERT_TRUE(ring::EncodeCommand(request, 99, slot).ok());
  ASSERT_TRUE(ring::CheckCommand(slot).ok());
  const OpRequest from_rpc = FromSubmitRequest(request);
  ExpectSame(FromCommand(slot), from_rpc);
  EXPECT_EQ(from_rpc.collective, static_cast<int32_t>(cclo::v1::REDUCE));
  EXPECT_EQ(from_rpc.algorithm, "binary_tree");
  EXPECT_EQ(from_rpc.recv.length, 23u);
  EXPECT_EQ(from_rpc.after, (std::vector<uint64_t>{31, 32}));
}

TEST(OpRequestTest, SlotsNoClientCouldHaveEncodedAreRefusedByName) {
  ring::CommandSlot good;
  ASSERT_TRUE(ring::EncodeCommand(EveryField(), 1, good).ok());
  auto refusal = [&](auto spoil) {
    ring::CommandSlot slot = good;
    spoil(slot);
    absl::Status status = ring::CheckCommand(slot);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  EXPECT_EQ(refusal([](ring::CommandSlot& s) { s.in_place = 2; }),
            "command slot field in_place is 2; expected 0 or 1");
  EXPECT_EQ(refusal([](ring::CommandSlot& s) { s.wait_for_room = 7; }),
            "command slot field wait_for_room is 7; expected 0 or 1");
  EXPECT_EQ(refusal([](ring::CommandSlot& s) { s.kind = 5; }),
            "command slot kind 5 is not a submission");
  EXPECT_EQ(refusal([](ring::CommandSlot& s) { s.reserved2 = 1; }),
            "command slot has nonzero reserved bytes");
  EXPECT_EQ(refusal([](ring::CommandSlot& s) { s.after_count = ring::kMaxAfter + 1; }),
            "command slot after_count 9 exceeds 8");
  EXPECT_EQ(
      refusal([](ring::CommandSlot& s) { std::memset(s.algorithm, 'x', ring::kAlgorithmBytes); }),
      "command slot algorithm is not NUL-terminated within 32 bytes");
}

/// The SubmitRequest that FromSubmitRequest makes `request` of.
cclo::v1::SubmitRequest ToSubmitRequest(const OpRequest& request) {
  cclo::v1::SubmitRequest out;
  out.set_comm_handle(request.comm_handle);
  out.set_collective(static_cast<cclo::v1::Collective>(request.collective));
  out.set_datatype(static_cast<cclo::v1::DataType>(request.datatype));
  out.set_reduce_op(static_cast<cclo::v1::ReduceOp>(request.reduce_op));
  out.set_root(request.root);
  out.set_peer(request.peer);
  out.set_tag(request.tag);
  out.set_count(request.count);
  out.set_in_place(request.in_place);
  out.set_algorithm(request.algorithm);
  for (auto [range, ref] :
       {std::pair{request.send, out.mutable_send()}, std::pair{request.recv, out.mutable_recv()}}) {
    ref->set_buffer_id(range.buffer_id);
    ref->set_offset(range.offset);
    ref->set_length(range.length);
  }
  out.set_timeout_ms(request.timeout_ms);
  out.set_wait_for_room(request.wait_for_room);
  for (uint64_t id : request.after) out.add_after(id);
  return out;
}

TEST(OpRequestTest, RandomSlotsAreRefusedByNameOrAreWhatAClientEncodes) {
  testing::Mutator random(3);
  // Valid slots to mutate, to get past the first checks.
  std::vector<ring::CommandSlot> seeds(3);
  ASSERT_TRUE(ring::EncodeCommand(EveryField(), 99, seeds[0]).ok());
  ASSERT_TRUE(ring::EncodeCommand(cclo::v1::SubmitRequest(), 0, seeds[1]).ok());
  cclo::v1::SubmitRequest longest = EveryField();
  longest.set_algorithm(std::string(ring::kAlgorithmBytes - 1, 'a'));
  for (uint64_t id = 3; id <= ring::kMaxAfter; ++id) longest.add_after(id);
  ASSERT_TRUE(ring::EncodeCommand(longest, 7, seeds[2]).ok());
  seeds.push_back(ring::EncodeRelease({1, 2}));
  int accepted = 0;
  constexpr int kRounds = 200000;
  for (int round = 0; round < kRounds; ++round) {
    ring::CommandSlot slot = random.Pick(seeds);
    if (round % 4 == 0) {
      random.Fill(&slot, sizeof(slot));
    } else {
      random.FlipBytes(&slot, sizeof(slot));
    }
    // Fields the checks look at, near their bounds.
    switch (random.Below(8)) {
      case 0:
        slot.in_place = static_cast<uint8_t>(random.Below(3));
        slot.wait_for_room = static_cast<uint8_t>(random.Below(3));
        break;
      case 1:
        slot.kind = static_cast<uint8_t>(random.Below(3));
        break;
      case 2:
        slot.after_count = static_cast<uint32_t>(
            random.OneIn(4) ? random.Any() : random.Below(ring::kMaxAfter + 3));
        break;
      case 3:  // an algorithm name of any length, its NUL anywhere or nowhere
        std::memset(slot.algorithm, 'r', ring::kAlgorithmBytes);
        if (const uint64_t nul = random.Below(ring::kAlgorithmBytes + 1);
            nul < ring::kAlgorithmBytes) {
          slot.algorithm[nul] = '\0';
        }
        break;
    }
    const absl::Status valid = ring::CheckCommand(slot);
    if (!valid.ok()) {
      EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_FALSE(valid.message().empty());
      continue;
    }
    ++accepted;
    // What ring.h says of every slot CheckCommand passes.
    EXPECT_LE(slot.in_place, 1);
    EXPECT_LE(slot.wait_for_room, 1);
    EXPECT_EQ(slot.kind, static_cast<uint8_t>(ring::CommandKind::kSubmit));
    EXPECT_EQ(slot.reserved | slot.reserved2, 0u);
    ASSERT_LE(slot.after_count, ring::kMaxAfter);
    ASSERT_NE(std::memchr(slot.algorithm, 0, ring::kAlgorithmBytes), nullptr);
    // The request it becomes, encoded as a client encodes it, is the slot again, but for
    // the bytes the daemon does not read: past the algorithm's NUL and the after ids past
    // after_count.
    const OpRequest request = FromCommand(slot);
    EXPECT_EQ(request.after.size(), slot.after_count);
    ring::CommandSlot expected = slot;
    const size_t name = std::strlen(expected.algorithm);
    std::memset(expected.algorithm + name, 0, ring::kAlgorithmBytes - name);
    std::fill(expected.after + expected.after_count, expected.after + ring::kMaxAfter, 0);
    ring::CommandSlot again;
    ASSERT_TRUE(ring::EncodeCommand(ToSubmitRequest(request), slot.cookie, again).ok());
    EXPECT_EQ(std::memcmp(&again, &expected, sizeof(again)), 0) << "round " << round;
  }
  // Enough of them pass to say something of what passes.
  EXPECT_GT(accepted, kRounds / 10);
}

TEST(OpRequestTest, TextIsCutWholeCharactersFirst) {
  char field[8];
  ring::PutText("1234567", field, sizeof(field));  // fits: 7 bytes and the NUL
  EXPECT_EQ(ring::GetText(field, sizeof(field)), "1234567");
  ring::PutText("12345678", field, sizeof(field));
  EXPECT_EQ(ring::GetText(field, sizeof(field)), "1234...");
  // "é" (2 bytes) would straddle the cut at byte 4: it goes whole.
  ring::PutText(
      "123\xc3\xa9"
      "567",
      field, sizeof(field));
  EXPECT_EQ(ring::GetText(field, sizeof(field)), "123...");
}

TEST(OpRequestTest, EmptyTextClearsTheField) {
  char field[8];
  std::memset(field, 'x', sizeof(field));
  // No characters and no pointer, as the message of an OK absl::Status.
  ring::PutText(std::string_view(), field, sizeof(field));
  EXPECT_EQ(std::string(field, sizeof(field)), std::string(sizeof(field), '\0'));
}

TEST(OpRequestTest, AFinishedSlotCarriesWhatWaitReports) {
  OpResult result;
  result.completion.status = absl::InternalError(std::string(300, 'm'));
  result.completion.algorithm = "ring";
  result.elapsed = absl::Microseconds(1234);
  const ring::CompletionSlot bare = ToCompletion(5, 6, result);
  EXPECT_EQ(bare.cookie, 5u);
  EXPECT_EQ(bare.op_id, 6u);
  EXPECT_EQ(bare.kind, static_cast<uint32_t>(ring::CompletionKind::kFinished));
  EXPECT_EQ(bare.code, static_cast<int32_t>(absl::StatusCode::kInternal));
  EXPECT_EQ(bare.elapsed_us, 1234u);
  // Cut to its room, NUL included, and marked; no policy fields for an op no policy chose.
  EXPECT_EQ(ring::GetText(bare.message, ring::kMessageBytes),
            std::string(ring::kMessageBytes - 4, 'm') + "...");
  EXPECT_EQ(ring::GetText(bare.protocol, ring::kProtocolBytes), "");
  EXPECT_EQ(bare.policy_version, 0u);

  result.protocol = hw::Protocol::kRendezvous;
  result.segment_bytes = 65536;
  result.chosen_by = "big allreduces";
  result.policy_version = 3;
  const ring::CompletionSlot slot = ToCompletion(5, 6, result);
  const cclo::v1::WaitResponse wait = ToWaitResponse(result);
  EXPECT_EQ(slot.code, wait.code());
  EXPECT_EQ(slot.elapsed_us, wait.elapsed_us());
  EXPECT_EQ(ring::GetText(slot.algorithm, ring::kAlgorithmBytes), wait.algorithm());
  EXPECT_EQ(ring::GetText(slot.protocol, ring::kProtocolBytes), wait.protocol());
  EXPECT_EQ(wait.protocol(), "rendezvous");
  EXPECT_EQ(slot.segment_bytes, wait.segment_bytes());
  EXPECT_EQ(ring::GetText(slot.chosen_by, ring::kChosenByBytes), wait.chosen_by());
  EXPECT_EQ(slot.policy_version, wait.policy_version());
}

}  // namespace
}  // namespace cclo::daemon
