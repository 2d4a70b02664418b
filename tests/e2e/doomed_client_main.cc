// doomed_client: a client process for the cleanup tests, made to be killed. It attaches to
// a cclod, takes what its mode says, prints "ready" and blocks until it is killed (SIGKILL
// from the test, or its parent's death); it gives up by itself after two minutes.
//
//   doomed_client <runtime_dir> buffer   a 64 KiB buffer, written to
//   doomed_client <runtime_dir> solo     and a 1-rank communicator with one allreduce done
//                                        and an 8 MiB one submitted and not waited for
//   doomed_client <runtime_dir> pair     and a 2-rank communicator (both ranks here): rank 0
//                                        has an allreduce in the engine (rank 1 never joins
//                                        it) and a second one queued behind it; a 1-rank
//                                        communicator has an op waiting for the first
//   doomed_client <runtime_dir> peer <token>
//                                        and rank 1 of the 2-rank communicator of <token>
//                                        (rank 0 elsewhere) with a receive from rank 0
//                                        (tag 7) that never comes and an allreduce behind it
//
// Exits 1 with the reason if anything fails before "ready".
#include <sys/prctl.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "cclo/client.h"

namespace {

constexpr absl::Duration kLifetime = absl::Minutes(2);
constexpr uint64_t kBufferBytes = 64 << 10;
constexpr uint64_t kSoloCount = 2 << 20;  // float32 elements: 8 MiB

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "doomed_client: %s: %s\n", what, status.ToString().c_str());
  return 1;
}

/// A 1-rank communicator of `client`.
absl::StatusOr<std::unique_ptr<cclo::Communicator>> JoinAlone(cclo::Client& client) {
  absl::StatusOr<std::string> token = client.CreateCommunicatorId();
  if (!token.ok()) return token.status();
  return client.Join(*token, 0, 1);
}

}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const std::string mode = argc >= 3 ? argv[2] : "";
  const bool usable = (argc == 3 && (mode == "buffer" || mode == "solo" || mode == "pair")) ||
                      (argc == 4 && mode == "peer");
  if (!usable) {
    std::fprintf(stderr, "usage: doomed_client <runtime_dir> buffer|solo|pair|peer <token>\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<cclo::Client>> client = cclo::Client::Attach(argv[1]);
  if (!client.ok()) return Fail("attach", client.status());
  absl::StatusOr<cclo::Buffer> buffer = (*client)->AllocBuffer(kBufferBytes);
  if (!buffer.ok()) return Fail("alloc", buffer.status());
  std::memset(buffer->data(), 1, buffer->size());

  // Kept alive until the process is killed.
  std::vector<std::unique_ptr<cclo::Communicator>> comms;
  std::vector<cclo::Buffer> buffers;
  std::vector<cclo::Request> requests;
  const cclo::DataType f32 = cclo::DataType::kFloat32;
  const cclo::ReduceOp sum = cclo::ReduceOp::kSum;
  const uint64_t count = kBufferBytes / 4;
  if (mode == "solo") {
    absl::StatusOr<std::unique_ptr<cclo::Communicator>> solo = JoinAlone(**client);
    if (!solo.ok()) return Fail("join alone", solo.status());
    if (absl::Status done = (*solo)->Allreduce(*buffer, *buffer, count, f32, sum); !done.ok()) {
      return Fail("allreduce alone", done);
    }
    absl::StatusOr<cclo::Buffer> big = (*client)->AllocBuffer(kSoloCount * 4);
    if (!big.ok()) return Fail("alloc", big.status());
    absl::StatusOr<cclo::Request> running =
        (*solo)->AllreduceAsync(*big, *big, kSoloCount, f32, sum);
    if (!running.ok()) return Fail("allreduce alone", running.status());
    requests.push_back(*std::move(running));
    buffers.push_back(*std::move(big));
    comms.push_back(*std::move(solo));
  } else if (mode == "pair") {
    absl::StatusOr<std::string> token = (*client)->CreateCommunicatorId();
    if (!token.ok()) return Fail("token", token.status());
    absl::StatusOr<std::unique_ptr<cclo::Communicator>> rank1;
    std::thread join1([&] { rank1 = (*client)->Join(*token, 1, 2); });
    absl::StatusOr<std::unique_ptr<cclo::Communicator>> rank0 = (*client)->Join(*token, 0, 2);
    join1.join();
    if (!rank0.ok()) return Fail("join rank 0", rank0.status());
    if (!rank1.ok()) return Fail("join rank 1", rank1.status());
    absl::StatusOr<std::unique_ptr<cclo::Communicator>> solo = JoinAlone(**client);
    if (!solo.ok()) return Fail("join alone", solo.status());
    // In the engine: rank 1 never submits its part.
    absl::StatusOr<cclo::Request> running =
        (*rank0)->AllreduceAsync(*buffer, *buffer, count, f32, sum);
    if (!running.ok()) return Fail("allreduce on rank 0", running.status());
    // Queued in the engine behind the first.
    absl::StatusOr<cclo::Request> queued =
        (*rank0)->AllreduceAsync(*buffer, *buffer, count, f32, sum);
    if (!queued.ok()) return Fail("second allreduce on rank 0", queued.status());
    // Held by the session until the first finishes.
    cclo::OpOptions after;
    after.after = {&*running};
    absl::StatusOr<cclo::Request> waiting =
        (*solo)->AllreduceAsync(*buffer, *buffer, count, f32, sum, after);
    if (!waiting.ok()) return Fail("allreduce alone", waiting.status());
    for (auto* request : {&running, &queued, &waiting}) requests.push_back(std::move(**request));
    for (auto* comm : {&rank0, &rank1, &solo}) comms.push_back(std::move(**comm));
  } else if (mode == "peer") {
    absl::StatusOr<std::unique_ptr<cclo::Communicator>> rank1 = (*client)->Join(argv[3], 1, 2);
    if (!rank1.ok()) return Fail("join rank 1", rank1.status());
    absl::StatusOr<cclo::Request> receiving =
        (*rank1)->RecvAsync(*buffer, 0, count, f32, /*peer=*/0, /*tag=*/7);
    if (!receiving.ok()) return Fail("receive on rank 1", receiving.status());
    absl::StatusOr<cclo::Request> reducing =
        (*rank1)->AllreduceAsync(*buffer, *buffer, count, f32, sum);
    if (!reducing.ok()) return Fail("allreduce on rank 1", reducing.status());
    for (auto* request : {&receiving, &reducing}) requests.push_back(std::move(**request));
    comms.push_back(*std::move(rank1));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  absl::SleepFor(kLifetime);
  std::fprintf(stderr, "doomed_client: not killed within %s\n",
               absl::FormatDuration(kLifetime).c_str());
  return 3;
}
