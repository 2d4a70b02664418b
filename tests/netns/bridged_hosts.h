// Hosts for tests: network namespaces joined by a Linux bridge.
//
// Each host is a network namespace with loopback up and one veth ("eth0") addressed
// 10.77.0.<host + 1>/24. The other ends of the veths are ports of a bridge ("br0") that
// lives in a namespace of its own, so nothing is added to the caller's namespace and
// deleting the namespaces deletes the bridge and the veths with them. Names carry the
// process id and a counter, so runs side by side never meet. A watchdog process deletes
// the namespaces if the test dies before the destructor runs (abort, signal, timeout).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cclo::testing {

class BridgedHosts {
 public:
  /// Creates `count` hosts (1..250). FAILED_PRECONDITION when this process cannot make
  /// network namespaces at all (not root, no `ip` command, namespace creation refused):
  /// tests skip then. Any other error is a failure of the setup itself.
  static absl::StatusOr<std::unique_ptr<BridgedHosts>> Create(int count);

  /// Deletes every namespace, and with them the bridge and the veths, and the hosts files.
  ~BridgedHosts();

  BridgedHosts(const BridgedHosts&) = delete;
  BridgedHosts& operator=(const BridgedHosts&) = delete;

  /// Host `host`'s address on the bridge, e.g. "10.77.0.1" for host 0.
  std::string address(int host) const;

  /// `argv` prefixed so that it runs inside host `host`'s namespace (`ip netns exec`).
  std::vector<std::string> Inside(int host, const std::vector<std::string>& argv = {}) const;

  /// Takes host `host`'s port on the bridge down (`up` false) or up again: a silent
  /// partition, as a switch that drops the host's packets makes; no reset reaches anyone.
  absl::Status SetLink(int host, bool up) const;

  /// Gives host `host` a file /etc/`name` of its own, `text` (as hosts, nsswitch.conf):
  /// `ip netns exec` mounts it over /etc/`name` for what runs Inside the host.
  absl::Status SetEtcFile(int host, const std::string& name, const std::string& text) const;

  /// Drops every packet that reaches host `host` (`up` false) or delivers them again: a
  /// one-way partition, as a switch that drops what goes to the host makes; what the host
  /// sends still arrives, and nothing tells it or anyone else.
  absl::Status SetInbound(int host, bool up) const;

 private:
  BridgedHosts(std::string ip, std::string tc, std::string prefix, int count);

  /// Starts the watchdog that deletes the namespaces once `watchdog_fd_` closes.
  absl::Status StartWatchdog();
  /// Creates the bridge namespace and every host; the first namespace failing to appear
  /// is FAILED_PRECONDITION.
  absl::Status Build();
  /// Runs `ip args...`, bounded; an error quotes the command and its output.
  absl::Status Ip(const std::vector<std::string>& args) const;
  /// Runs `program args...` as Ip runs `ip`.
  absl::Status Run(const std::string& program, const std::vector<std::string>& args) const;

  std::string SwitchNetns() const { return prefix_ + "sw"; }
  std::string HostNetns(int host) const;
  /// Where `ip netns exec` finds the files it mounts over /etc for namespace `netns`.
  static std::string EtcDir(const std::string& netns) { return "/etc/netns/" + netns; }
  /// The bridge's port that host `host`'s veth ends at.
  static std::string Port(int host) { return "p" + std::to_string(host); }
  std::vector<std::string> AllNetns() const;

  const std::string ip_;      ///< absolute path of the `ip` command
  const std::string tc_;      ///< absolute path of the `tc` command; empty if there is none
  const std::string prefix_;  ///< of every namespace name, unique per object
  const int count_;
  int watchdog_fd_ = -1;  ///< write end of the watchdog's stdin; closing it fires it
};

}  // namespace cclo::testing
