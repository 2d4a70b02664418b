#include "tests/netns/bridged_hosts.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/e2e/cluster.h"

extern char** environ;

namespace cclo::testing {
namespace {

constexpr absl::Duration kIpTimeout = absl::Seconds(20);

// Where iproute2 installs `ip` and `tc` on Debian and elsewhere.
std::string FindIproute2(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    if (access((dir + name).c_str(), X_OK) == 0) return dir + name;
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<BridgedHosts>> BridgedHosts::Create(int count) {
  if (count < 1 || count > 250) {
    return absl::InvalidArgumentError(absl::StrCat(count, " hosts is not in [1, 250]"));
  }
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("network namespaces need root; this test runs as uid ", geteuid()));
  }
  std::string ip = FindIproute2("ip");
  if (ip.empty()) {
    return absl::FailedPreconditionError(
        "no `ip` command (package iproute2) in /usr/sbin, /sbin, /usr/bin or /bin");
  }
  static std::atomic<int> made{0};
  std::unique_ptr<BridgedHosts> hosts(
      new BridgedHosts(std::move(ip), FindIproute2("tc"),
                       absl::StrCat("cclo", getpid(), "n", made.fetch_add(1), "-"), count));
  if (absl::Status started = hosts->StartWatchdog(); !started.ok()) return started;
  if (absl::Status built = hosts->Build(); !built.ok()) return built;
  return hosts;
}

BridgedHosts::BridgedHosts(std::string ip, std::string tc, std::string prefix, int count)
    : ip_(std::move(ip)), tc_(std::move(tc)), prefix_(std::move(prefix)), count_(count) {}

BridgedHosts::~BridgedHosts() {
  // Namespaces that Create never made fail to delete; that is fine.
  for (const std::string& netns : AllNetns()) {
    Ip({"netns", "delete", netns}).IgnoreError();
    std::error_code ignored;
    std::filesystem::remove_all(EtcDir(netns), ignored);
  }
  if (watchdog_fd_ >= 0) close(watchdog_fd_);
}

std::string BridgedHosts::address(int host) const { return absl::StrCat("10.77.0.", host + 1); }

std::vector<std::string> BridgedHosts::Inside(int host,
                                              const std::vector<std::string>& argv) const {
  std::vector<std::string> command = {ip_, "netns", "exec", HostNetns(host)};
  command.insert(command.end(), argv.begin(), argv.end());
  return command;
}

absl::Status BridgedHosts::SetLink(int host, bool up) const {
  return Ip({"-n", SwitchNetns(), "link", "set", Port(host), up ? "up" : "down"});
}

absl::Status BridgedHosts::SetEtcFile(int host, const std::string& name,
                                      const std::string& text) const {
  const std::string dir = EtcDir(HostNetns(host));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  std::ofstream file(dir + "/" + name);
  if (error || !(file << text).flush()) {
    return absl::InternalError(
        absl::StrCat("cannot write ", dir, "/", name, ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::Status BridgedHosts::SetInbound(int host, bool up) const {
  if (tc_.empty()) {
    return absl::FailedPreconditionError(
        "no `tc` command (package iproute2) in /usr/sbin, /sbin, /usr/bin or /bin");
  }
  const std::string netns = HostNetns(host);
  if (up) {
    absl::Status done = Run(tc_, {"-n", netns, "qdisc", "del", "dev", "eth0", "ingress"});
    if (done.ok()) done = Ip({"-n", netns, "link", "del", "blk"});
    return done;
  }
  // Every packet that reaches eth0 goes to "blk", a veth kept down, which drops it (a
  // kernel may have neither netem nor tc's drop action).
  absl::Status done =
      Ip({"-n", netns, "link", "add", "blk", "type", "veth", "peer", "name", "blk1"});
  if (done.ok()) done = Run(tc_, {"-n", netns, "qdisc", "add", "dev", "eth0", "ingress"});
  if (done.ok()) {
    done = Run(tc_, {"-n",    netns,      "filter", "add",    "dev",      "eth0", "parent",
                     "ffff:", "protocol", "all",    "u32",    "match",    "u32",  "0",
                     "0",     "action",   "mirred", "egress", "redirect", "dev",  "blk"});
  }
  return done;
}

std::string BridgedHosts::HostNetns(int host) const { return absl::StrCat(prefix_, "h", host); }

std::vector<std::string> BridgedHosts::AllNetns() const {
  std::vector<std::string> all = {SwitchNetns()};
  for (int host = 0; host < count_; ++host) all.push_back(HostNetns(host));
  return all;
}

absl::Status BridgedHosts::StartWatchdog() {
  // A shell in its own session reads its stdin until EOF, which comes when this process
  // closes the write end or dies however it dies; then it kills what still runs in the
  // namespaces (daemons and clients of a test that died) and deletes them and their hosts
  // files.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 for the watchdog failed");
  std::vector<std::string> argv = {"/bin/sh", "-c",
                                   "cat >/dev/null; ip=$1; shift; for ns; do "
                                   "kill -9 $(\"$ip\" netns pids \"$ns\"); "
                                   "\"$ip\" netns delete \"$ns\"; rm -rf \"/etc/netns/$ns\"; "
                                   "done 2>/dev/null",
                                   "cclo-netns-watchdog", ip_};
  for (const std::string& netns : AllNetns()) argv.push_back(netns);
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(fds[0]);
  if (error != 0) {
    close(fds[1]);
    return absl::InternalError(absl::StrCat("cannot start the namespace watchdog: error ", error));
  }
  watchdog_fd_ = fds[1];
  return absl::OkStatus();
}

absl::Status BridgedHosts::Build() {
  // 1. The switch: a namespace holding only the bridge.
  if (absl::Status made = Ip({"netns", "add", SwitchNetns()}); !made.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create network namespaces: ", made.message()));
  }
  const std::string sw = SwitchNetns();
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"-n", sw, "link", "add", "br0", "type", "bridge"},
                                             {"-n", sw, "link", "set", "br0", "up"}}) {
    if (absl::Status done = Ip(args); !done.ok()) return done;
  }
  // 2. Every host: a namespace whose eth0 is one end of a veth, the other end a bridge port.
  for (int host = 0; host < count_; ++host) {
    const std::string netns = HostNetns(host);
    const std::string port = Port(host);
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"netns", "add", netns},
             {"-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
              netns},
             {"-n", sw, "link", "set", port, "master", "br0", "up"},
             {"-n", netns, "addr", "add", absl::StrCat(address(host), "/24"), "dev", "eth0"},
             {"-n", netns, "link", "set", "eth0", "up"},
             {"-n", netns, "link", "set", "lo", "up"}}) {
      if (absl::Status done = Ip(args); !done.ok()) return done;
    }
  }
  return absl::OkStatus();
}

absl::Status BridgedHosts::Ip(const std::vector<std::string>& args) const { return Run(ip_, args); }

absl::Status BridgedHosts::Run(const std::string& program,
                               const std::vector<std::string>& args) const {
  std::vector<std::string> command = {program};
  command.insert(command.end(), args.begin(), args.end());
  ProcessResult result = Process(command).Wait(kIpTimeout);
  if (result.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("`", absl::StrJoin(command, " "), "` ",
                                          result.timed_out ? "timed out" : "failed", ": ",
                                          result.output));
}

}  // namespace cclo::testing
