// Test harness: real cclod processes on loopback (ports 0, runtime dirs under a short
// /tmp path) and real client processes, all with deadlines; everything is killed and
// removed when the harness goes away (the processes also when it is killed).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace cclo::testing {

/// Path of a binary in the test's runfiles, e.g. Runfile("daemon/cclod").
std::string Runfile(const std::string& path);

/// What a finished process left behind.
struct ProcessResult {
  int exit_code = -1;  ///< -1 if killed by a signal or timed out
  bool timed_out = false;
  std::string output;  ///< stdout and stderr, interleaved
};

/// A child process whose stdout+stderr are collected by a reader thread.
class Process {
 public:
  /// Starts `argv` (argv[0] an absolute path). The process gets SIGKILL when the thread
  /// that started it ends (PR_SET_PDEATHSIG), so a harness killed by a signal leaves none
  /// behind; start processes from a thread that outlives them. A program that cannot be
  /// started has pid() -1 and exit code -1.
  explicit Process(const std::vector<std::string>& argv);
  ~Process();  ///< SIGKILLs the process if it still runs
  pid_t pid() const { return pid_; }
  /// Waits until `text` appears in the output or the process exits or `timeout` passes.
  bool WaitForOutput(const std::string& text, absl::Duration timeout);
  /// Waits for exit; SIGKILLs at the timeout.
  ProcessResult Wait(absl::Duration timeout);
  void Signal(int signal);
  std::string Output() const;

 private:
  void Drain(int fd);
  pid_t pid_ = -1;
  int pidfd_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  mutable absl::Mutex mu_;
  std::string output_ ABSL_GUARDED_BY(mu_);
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reader_;
};

/// One cclod with its own runtime dir and config.
class Daemon {
 public:
  /// Starts cclod listening on `host` with free ports and `extra_config` YAML lines, behind
  /// `launcher` (an absolute path, e.g. {"/usr/bin/prlimit", "--nofile=80"}) when given;
  /// waits until ready.
  explicit Daemon(const std::string& extra_config = "",
                  const std::vector<std::string>& launcher = {},
                  const std::string& host = "127.0.0.1");
  ~Daemon();
  /// Starts cclod again with the same config and runtime dir (new ports) once the process
  /// before it ended (the test killed or stopped it); waits until ready.
  void Restart();
  const std::string& runtime_dir() const { return dir_; }
  /// "host:port" of the daemon's Peer service, as rank tables name it.
  const std::string& peer_address() const { return peer_address_; }
  /// "host:port" where the daemon's engine accepts data sessions.
  const std::string& data_address() const { return data_address_; }
  /// The port of data_address().
  int data_port() const { return data_port_; }
  /// "host:port" of the daemon's Prometheus exposition.
  const std::string& metrics_address() const { return metrics_address_; }
  Process& process() { return *process_; }

 private:
  /// Starts `command_` and reads its ports from its ready line.
  void Start();

  std::vector<std::string> command_;
  std::string host_;
  std::string dir_;
  std::string peer_address_;
  std::string data_address_;
  std::string metrics_address_;
  int data_port_ = 0;
  std::unique_ptr<Process> process_;
};

/// Runs cclod with a config of `extra_config` YAML lines after a fresh runtime dir and free
/// ports, behind `launcher` as Daemon does, until it exits (at most 30 s), for configs it must
/// refuse to start with.
ProcessResult RunCclod(const std::string& extra_config,
                       const std::vector<std::string>& launcher = {});

/// A launcher (as Daemon takes it) that runs cclod in a mount namespace of its own, with
/// `nsswitch` (a file of the test's) bound over /etc/nsswitch.conf, `file` over `covered`
/// (/etc/hosts, say) and nscd's socket dir hidden, so that the files alone answer lookups;
/// an error saying why where this host gives no mount namespace (not root, say).
absl::StatusOr<std::vector<std::string>> WithOwnFiles(const std::string& nsswitch,
                                                      const std::string& file,
                                                      const std::string& covered);

/// Runs `ccloctl --runtime-dir <daemon's> args...` and returns what it left behind.
ProcessResult Ccloctl(const Daemon& daemon, const std::vector<std::string>& args);

/// The body of an HTTP/1.0 GET of `path` from "ipv4:port" (empty if no answer within 10 s).
std::string HttpGet(const std::string& address, const std::string& path);

/// The body of GET /metrics from the daemon's exposition (empty if it did not answer
/// within 10 s).
std::string Scrape(const Daemon& daemon);

/// How many times `text` occurs in `output`.
size_t Occurrences(const std::string& output, const std::string& text);

/// Calls `condition` until it holds or `timeout` passes (checking every 20 ms); returns
/// whether it held. For states only visible by asking (e.g. through ccloctl).
bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout);

/// Runs client processes side by side and collects their results.
std::vector<ProcessResult> RunAll(const std::vector<std::vector<std::string>>& commands,
                                  absl::Duration timeout);

/// `cclo-run token` against a daemon: a fresh communicator token.
std::string NewToken(const Daemon& root);

}  // namespace cclo::testing
