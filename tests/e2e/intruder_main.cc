// A client of another user, for the tenant isolation tests. Started as root, it drops to
// `uid` (group `uid` too, no supplementary groups) before it touches the daemon, then:
//
//   intruder RUNTIME_DIR UID attach
//       attaches and prints "attach CODE MESSAGE" (CODE 0 and the session id, then stays
//       attached for 60 s; or the refusal).
//   intruder RUNTIME_DIR UID intrude BUFFER_ID COMM_HANDLE OP_ID TOKEN
//       attaches, then names another tenant's buffer, communicator handle, op and
//       communicator token in every Client RPC and ring command that takes them (steps
//       ring_*), tries a forged session
//       token and the admin socket, and prints "STEP CODE MESSAGE" for each.
//   intruder RUNTIME_DIR UID hog COUNT
//       attaches, joins ranks 0 and 1 of a new communicator and sends COUNT int32 from
//       rank 0 to rank 1, which never receives them; then rank 0 receives one int32 from
//       rank 1, a receive submitted after those sends, so that once it is done the engine
//       has taken them all. Prints "hog CODE MESSAGE" (the receive's result) and stays
//       attached for 60 s.
//   intruder RUNTIME_DIR UID join TOKEN RANK SIZE [TIMEOUT_MS]
//       attaches and joins RANK of SIZE with TOKEN (another tenant's), with a timeout of
//       TIMEOUT_MS (RawSession's if not given); prints "join CODE MESSAGE".
#include <grp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cclo/client.h"
#include "cclo/v1/admin.grpc.pb.h"
#include "tests/e2e/raw_session.h"

namespace cclo::testing {
namespace {

void Print(const std::string& step, const grpc::Status& status) {
  std::printf("%s %d %s\n", step.c_str(), static_cast<int>(status.error_code()),
              status.error_message().c_str());
}

void Intrude(const std::string& dir, uint64_t buffer, uint64_t handle, uint64_t op,
             const std::string& token) {
  RawSession session(dir);
  const uint64_t own_buffer = session.Alloc(4096);
  uint64_t own_handle = 0;
  Print("join_own", session.Join(session.NewToken(), 0, 1, &own_handle));

  cclo::v1::FreeBufferRequest free;
  free.set_buffer_id(buffer);
  cclo::v1::FreeBufferResponse freed;
  Print("free_buffer", session.stub().FreeBuffer(session.Context().get(), free, &freed));
  Print("submit_their_handle", session.Run(AllreduceRequest(handle, own_buffer, 16)));
  Print("submit_their_buffer", session.Run(AllreduceRequest(own_handle, buffer, 16)));
  cclo::v1::SubmitRequest mixed = AllreduceRequest(own_handle, own_buffer, 16);
  mixed.mutable_recv()->set_buffer_id(buffer);
  Print("submit_their_recv_buffer", session.Run(mixed));
  cclo::v1::SubmitRequest after = AllreduceRequest(own_handle, own_buffer, 16);
  after.add_after(op);
  Print("submit_after_their_op", session.Run(after));
  // The same four through the command ring.
  Print("ring_their_handle", session.RunOnRing(AllreduceRequest(handle, own_buffer, 16)));
  Print("ring_their_buffer", session.RunOnRing(AllreduceRequest(own_handle, buffer, 16)));
  Print("ring_their_recv_buffer", session.RunOnRing(mixed));
  Print("ring_after_their_op", session.RunOnRing(after));

  cclo::v1::WaitRequest wait;
  wait.set_op_id(op);
  cclo::v1::WaitResponse waited;
  Print("wait_their_op", session.stub().Wait(session.Context().get(), wait, &waited));
  cclo::v1::CancelRequest cancel;
  cancel.set_op_id(op);
  cclo::v1::CancelResponse cancelled;
  Print("cancel_their_op", session.stub().Cancel(session.Context().get(), cancel, &cancelled));
  Print("destroy_their_comm", session.Destroy(handle));
  Print("join_their_comm", session.Join(token, 1, 2));

  grpc::ClientContext forged;
  forged.AddMetadata("cclo-session", std::string(64, '0'));
  forged.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  cclo::v1::AllocBufferRequest alloc;
  alloc.set_bytes(4096);
  cclo::v1::AllocBufferResponse allocated;
  Print("forged_session", session.stub().AllocBuffer(&forged, alloc, &allocated));

  auto admin = cclo::v1::Admin::NewStub(
      grpc::CreateChannel("unix:" + dir + "/admin.sock", grpc::InsecureChannelCredentials()));
  grpc::ClientContext admin_context;
  admin_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  cclo::v1::StatusResponse status;
  Print("admin_status", admin->Status(&admin_context, {}, &status));
  Print("run_own", session.Run(AllreduceRequest(own_handle, own_buffer, 16)));
  Print("ring_own", session.RunOnRing(AllreduceRequest(own_handle, own_buffer, 16)));
}

void PrintHog(const absl::Status& status) {
  std::printf("hog %d %s\n", static_cast<int>(status.code()),
              std::string(status.message()).c_str());
  std::fflush(stdout);
}

void Hog(const std::string& dir, uint64_t count) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Attach(dir);
  if (!client.ok()) return PrintHog(client.status());
  absl::StatusOr<Buffer> buffer = (*client)->AllocBuffer(4096);
  absl::StatusOr<std::string> token = (*client)->CreateCommunicatorId();
  if (!buffer.ok() || !token.ok()) return PrintHog(buffer.ok() ? token.status() : buffer.status());
  absl::StatusOr<std::unique_ptr<Communicator>> second;
  std::thread joining([&] { second = (*client)->Join(*token, 1, 2); });
  absl::StatusOr<std::unique_ptr<Communicator>> first = (*client)->Join(*token, 0, 2);
  joining.join();
  if (!first.ok() || !second.ok()) return PrintHog(first.ok() ? second.status() : first.status());
  std::vector<Request> sends;
  for (uint64_t i = 0; i < count; ++i) {
    absl::StatusOr<Request> sent = (*first)->SendAsync(*buffer, 0, 1, DataType::kInt32, 1, 1);
    if (!sent.ok()) return PrintHog(sent.status());
    sends.push_back(*std::move(sent));
  }
  absl::StatusOr<Request> received = (*first)->RecvAsync(*buffer, 64, 1, DataType::kInt32, 1, 2);
  if (!received.ok()) return PrintHog(received.status());
  absl::Status status = (*second)->Send(*buffer, 128, 1, DataType::kInt32, 0, 2);
  if (status.ok()) status = received->Wait();
  PrintHog(status);
  if (status.ok()) sleep(60);  // holds what it staged while the test looks
}

}  // namespace
}  // namespace cclo::testing

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: intruder RUNTIME_DIR UID attach|intrude|join|hog ...\n");
    return 2;
  }
  const std::string dir = argv[1];
  const auto uid = static_cast<uid_t>(std::strtoul(argv[2], nullptr, 10));
  if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) {
    std::perror("dropping to the test uid");
    return 2;
  }
  const std::string mode = argv[3];
  if (mode == "attach") {
    absl::StatusOr<std::unique_ptr<cclo::Client>> client = cclo::Client::Attach(dir);
    const std::string said = client.ok() ? std::to_string((*client)->session_id())
                                         : std::string(client.status().message());
    std::printf("attach %d %s\n", static_cast<int>(client.status().code()), said.c_str());
    std::fflush(stdout);
    // Attached: stay so that the test can look at the session, then leave by ourselves.
    if (client.ok()) sleep(60);
    return 0;
  }
  if (mode == "intrude" && argc == 8) {
    cclo::testing::Intrude(dir, std::strtoull(argv[4], nullptr, 10),
                           std::strtoull(argv[5], nullptr, 10), std::strtoull(argv[6], nullptr, 10),
                           argv[7]);
    return 0;
  }
  if (mode == "join" && (argc == 7 || argc == 8)) {
    cclo::testing::RawSession session(dir);
    cclo::testing::Print("join", session.Join(argv[4], std::strtoul(argv[5], nullptr, 10),
                                              std::strtoul(argv[6], nullptr, 10), nullptr,
                                              argc == 8 ? std::strtoul(argv[7], nullptr, 10)
                                                        : cclo::testing::kJoinTimeoutMs));
    return 0;
  }
  if (mode == "hog" && argc == 5) {
    cclo::testing::Hog(dir, std::strtoull(argv[4], nullptr, 10));
    return 0;
  }
  std::fprintf(stderr, "intruder: bad arguments\n");
  return 2;
}
