// `ccloctl policy get|set|validate|explain`: the daemon's algorithm-selection policy.
#pragma once

#include <ostream>
#include <string>

#include "CLI/CLI.hpp"
#include "client/ccloctl/admin_rpc.h"

namespace cclo::ccloctl {

class PolicyCommand {
 public:
  /// Adds `policy` and its subcommands to `app`.
  explicit PolicyCommand(CLI::App& app);

  /// True when the command line named `policy`.
  bool parsed() const { return policy_->parsed(); }

  /// Runs the parsed subcommand, or refuses its absence naming them all; returns the exit
  /// code.
  int Run(AdminRpc& admin, bool json, std::ostream& out, std::ostream& err) const;

 private:
  CLI::App* policy_;
  CLI::App* get_;
  CLI::App* set_;
  CLI::App* validate_;
  CLI::App* explain_;
  std::string file_;
  std::string comm_id_;
  std::string op_;
  std::string bytes_ = "0";
  std::string datatype_ = "float32";
  uint32_t world_size_ = 0;
  std::string transport_;
  std::string tenant_;
  std::string label_;
};

}  // namespace cclo::ccloctl
