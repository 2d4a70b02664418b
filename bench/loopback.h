// A connected pair of loopback TCP sockets, for the benches that time the kernel's path.
#pragma once

#include <utility>

namespace cclo::bench {

/// Connects a new socket to a new listener on 127.0.0.1: {connecting fd, accepted fd}, both
/// blocking, or {-1, -1}.
std::pair<int, int> LoopbackPair();

}  // namespace cclo::bench
