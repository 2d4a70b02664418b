// A rank-1 client for wall_clock_test, run under the wall clock shim: joins `token` at the
// daemon in `runtime_dir`, posts a receive of 256 float32 from rank 0 (tag 7, timeout 20 s),
// says "posted", and waits for SIGUSR1 (the test steps this process's wall clock meanwhile).
// Then it tests the receive once ("tested: running"), waits for it, and checks that element
// i is i + 0.5 ("received 256 floats"). Any error is printed and exits 1.
#include <signal.h>

#include <cstdio>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "cclo/client.h"

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::printf("%s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::printf("usage: wall_clock_client <runtime_dir> <token>\n");
    return 2;
  }
  // Blocked in every thread (they inherit it), so that only sigwait takes it.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);

  auto client = cclo::Client::Attach(argv[1]);
  if (!client.ok()) return Fail("attach", client.status());
  auto comm = (*client)->Join(argv[2], 1, 2, absl::Seconds(30));
  if (!comm.ok()) return Fail("join", comm.status());
  auto buffer = (*client)->AllocBuffer(256 * sizeof(float));
  if (!buffer.ok()) return Fail("alloc", buffer.status());
  cclo::OpOptions options;
  options.timeout = absl::Seconds(20);
  auto recv = (*comm)->RecvAsync(*buffer, 0, 256, cclo::DataType::kFloat32, 0, 7, options);
  if (!recv.ok()) return Fail("recv", recv.status());
  std::printf("posted\n");
  std::fflush(stdout);

  int signal = 0;
  sigwait(&usr1, &signal);
  absl::StatusOr<bool> tested = recv->Test();
  if (!tested.ok()) return Fail("test", tested.status());
  std::printf("tested: %s\n", *tested ? "done" : "running");
  std::fflush(stdout);
  if (absl::Status waited = recv->Wait(); !waited.ok()) return Fail("wait", waited);
  std::span<const float> got = buffer->span<float>();
  for (size_t i = 0; i < 256; ++i) {
    if (got[i] != static_cast<float>(i) + 0.5f) {
      std::printf("element %zu is %g, not %g\n", i, got[i], static_cast<float>(i) + 0.5f);
      return 1;
    }
  }
  std::printf("received 256 floats\n");
  return 0;
}
