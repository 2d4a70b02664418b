#include "tests/e2e/cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "hw/types.h"

extern char** environ;

namespace cclo::testing {

std::string Runfile(const std::string& path) {
  const char* root = std::getenv("TEST_SRCDIR");
  return absl::StrCat(root ? root : ".", "/cclod/", path);
}

namespace {

// In a child between fork and exec: reports `error` on `fd` and exits. Async-signal-safe.
[[noreturn]] void ChildFailed(int fd, int error) {
  (void)!write(fd, &error, sizeof(error));
  _exit(127);
}

}  // namespace

Process::Process(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) std::abort();
  // The child's errno if it cannot exec; a successful exec closes it unwritten.
  int exec_fds[2];
  if (pipe2(exec_fds, O_CLOEXEC) != 0) std::abort();
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls until exec: the parent has other threads. The child
    // dies with the thread that started it, however that ends (a test or cclo-bench
    // killed by a signal leaves no daemon or rank behind); if the parent died before
    // prctl, getppid() already names another process. The setting survives exec.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ChildFailed(exec_fds[1], errno);
    if (getppid() != parent) _exit(127);
    if (dup2(pipe_fds[1], 1) < 0 || dup2(pipe_fds[1], 2) < 0) ChildFailed(exec_fds[1], errno);
    execve(args[0], args.data(), environ);
    ChildFailed(exec_fds[1], errno);
  }
  close(exec_fds[1]);
  close(pipe_fds[1]);
  int exec_error = 0;
  ssize_t got;
  do {
    got = read(exec_fds[0], &exec_error, sizeof(exec_error));
  } while (got < 0 && errno == EINTR);
  close(exec_fds[0]);
  if (pid_ > 0 && got > 0) {  // it never ran `argv`
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  if (pid_ < 0) {
    reaped_ = true;
  } else {
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  }
  reader_ = std::thread([this, fd = pipe_fds[0]] { Drain(fd); });
}

Process::~Process() {
  if (!reaped_) {
    Signal(SIGKILL);
    Wait(absl::Seconds(10));
  }
  reader_.join();
  if (pidfd_ >= 0) close(pidfd_);
}

void Process::Drain(int fd) {
  char chunk[4096];
  for (;;) {
    ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    absl::MutexLock lock(&mu_);
    if (got <= 0) {
      eof_ = true;
      break;
    }
    output_.append(chunk, static_cast<size_t>(got));
  }
  close(fd);
}

bool Process::WaitForOutput(const std::string& text, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto seen = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return eof_ || output_.find(text) != std::string::npos;
  };
  mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  return output_.find(text) != std::string::npos;
}

ProcessResult Process::Wait(absl::Duration timeout) {
  ProcessResult result;
  if (!reaped_) {
    pollfd pfd{pidfd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 0) {
      result.timed_out = true;
      kill(pid_, SIGKILL);
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&eof_), absl::Seconds(10));
    result.output = output_;
  }
  result.exit_code = exit_code_;
  return result;
}

void Process::Signal(int signal) {
  if (!reaped_) kill(pid_, signal);
}

std::string Process::Output() const {
  absl::MutexLock lock(&mu_);
  return output_;
}

namespace {

// The "host:port" that follows `label` (e.g. "peer ") in cclod's ready line, or "".
std::string ReadyAddress(const std::string& output, const std::string& label) {
  const size_t ready = output.find("ready: ");
  if (ready == std::string::npos) return "";
  const size_t start = output.find(label, ready);
  if (start == std::string::npos) return "";
  const size_t begin = start + label.size();
  return output.substr(begin, output.find_first_of(", \n", begin) - begin);
}

// A sanitizer's report (--config=asan or tsan) ends the daemon, or is printed at its exit,
// where no test looks: it fails the test here.
void AbortOnSanitizerReport(const std::string& output) {
  for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                             "runtime error:", "WARNING: ThreadSanitizer"}) {
    if (output.find(report) != std::string::npos) {
      std::fprintf(stderr, "cclod reported a sanitizer error:\n%s\n", output.c_str());
      std::abort();
    }
  }
}

}  // namespace

Daemon::Daemon(const std::string& extra_config, const std::vector<std::string>& launcher,
               const std::string& host)
    : command_(launcher), host_(host) {
  char dir_template[] = "/tmp/cclo.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string config_path = dir + "/cclod.yaml";
  std::ofstream(config_path) << "runtime_dir: " << dir << "/run\n"
                             << "host: '" << host << "'\n"
                             << "peer_port: 0\ndata_port: 0\nmetrics_port: 0\n"
                             << "log_level: debug\n"
                             << extra_config;
  command_.insert(command_.end(), {Runfile("daemon/cclod"), "--config", config_path});
  dir_ = dir + "/run";
  Start();
}

void Daemon::Start() {
  process_ = std::make_unique<Process>(command_);
  if (!process_->WaitForOutput("ready: peer", absl::Seconds(30))) {
    std::fprintf(stderr, "cclod did not become ready:\n%s\n", process_->Output().c_str());
    std::abort();
  }
  const std::string output = process_->Output();
  peer_address_ = ReadyAddress(output, "peer ");
  data_address_ = ReadyAddress(output, "data ");
  metrics_address_ = ReadyAddress(output, "metrics ");
  data_port_ = std::atoi(data_address_.c_str() + data_address_.rfind(':') + 1);
  if (data_address_ != hw::HostPort(host_, data_port_)) {
    std::fprintf(stderr, "cclod's ready line has no data address on %s:\n%s\n", host_.c_str(),
                 output.c_str());
    std::abort();
  }
}

void Daemon::Restart() {
  AbortOnSanitizerReport(process_->Wait(absl::Seconds(15)).output);
  Start();
}

Daemon::~Daemon() {
  process_->Signal(SIGTERM);
  const ProcessResult result = process_->Wait(absl::Seconds(15));
  std::error_code ignored;
  std::filesystem::remove_all(std::string(absl::StripSuffix(dir_, "/run")), ignored);
  AbortOnSanitizerReport(result.output);
}

ProcessResult RunCclod(const std::string& extra_config, const std::vector<std::string>& launcher) {
  char dir[] = "/tmp/cclo.XXXXXX";
  if (mkdtemp(dir) == nullptr) std::abort();
  const std::string config = std::string(dir) + "/cclod.yaml";
  std::ofstream(config) << "runtime_dir: " << dir << "/run\npeer_port: 0\ndata_port: 0\n"
                        << "metrics_port: 0\n"
                        << extra_config;
  std::vector<std::string> command = launcher;
  command.insert(command.end(), {Runfile("daemon/cclod"), "--config", config});
  ProcessResult result = Process(command).Wait(absl::Seconds(30));
  std::filesystem::remove_all(dir);
  return result;
}

size_t Occurrences(const std::string& output, const std::string& text) {
  size_t count = 0;
  for (size_t at = output.find(text); at != std::string::npos; at = output.find(text, at + 1)) {
    ++count;
  }
  return count;
}

absl::StatusOr<std::vector<std::string>> WithOwnFiles(const std::string& nsswitch,
                                                      const std::string& file,
                                                      const std::string& covered) {
  if (geteuid() != 0) return absl::FailedPreconditionError("needs root for a mount namespace");
  const std::vector<std::string> launcher = {
      "/usr/bin/unshare",
      "--mount",
      "/bin/sh",
      "-c",
      "mount --bind \"$0\" /etc/nsswitch.conf && mount --bind \"$1\" \"$2\" && "
      "{ [ ! -d /run/nscd ] || mount -t tmpfs none /run/nscd; } && shift 2 && exec \"$@\"",
      nsswitch,
      file,
      covered};
  std::vector<std::string> probe = launcher;
  probe.push_back("/bin/true");
  const ProcessResult probed = Process(probe).Wait(absl::Seconds(10));
  if (probed.exit_code != 0) {
    return absl::FailedPreconditionError("no mount namespace here: " + probed.output);
  }
  return launcher;
}

ProcessResult Ccloctl(const Daemon& daemon, const std::vector<std::string>& args) {
  std::vector<std::string> command = {Runfile("client/ccloctl"), "--runtime-dir",
                                      daemon.runtime_dir()};
  command.insert(command.end(), args.begin(), args.end());
  return Process(command).Wait(absl::Seconds(30));
}

bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::vector<ProcessResult> RunAll(const std::vector<std::vector<std::string>>& commands,
                                  absl::Duration timeout) {
  std::vector<std::unique_ptr<Process>> processes;
  for (const auto& command : commands) processes.push_back(std::make_unique<Process>(command));
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<ProcessResult> results;
  for (auto& process : processes) {
    results.push_back(process->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration())));
  }
  return results;
}

std::string NewToken(const Daemon& root) {
  Process process({Runfile("client/cclo-run"), "token", "--runtime-dir", root.runtime_dir()});
  ProcessResult result = process.Wait(absl::Seconds(30));
  if (result.exit_code != 0) {
    std::fprintf(stderr, "cclo-run token failed:\n%s\n", result.output.c_str());
    std::abort();
  }
  size_t start = result.output.find("cclo1-");
  if (start == std::string::npos) {
    std::fprintf(stderr, "cclo-run token printed no token:\n%s\n", result.output.c_str());
    std::abort();
  }
  size_t end = result.output.find_first_of(" \t\r\n", start);
  return result.output.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<uint16_t>(std::atoi(address.c_str() + colon + 1)));
  if (colon == std::string::npos ||
      inet_pton(AF_INET, address.substr(0, colon).c_str(), &target.sin_addr) != 1) {
    return "";
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof(target)) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    char chunk[4096];
    pollfd ready{fd, POLLIN, 0};
    while (absl::Now() < deadline &&
           poll(&ready, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()))) >
               0) {
      ssize_t got = recv(fd, chunk, sizeof(chunk), 0);
      if (got <= 0) break;
      response.append(chunk, static_cast<size_t>(got));
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

std::string Scrape(const Daemon& daemon) { return HttpGet(daemon.metrics_address(), "/metrics"); }

}  // namespace cclo::testing
