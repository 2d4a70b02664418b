#include "bench/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cclo::bench {

std::pair<int, int> LoopbackPair() {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  auto* generic = reinterpret_cast<sockaddr*>(&address);
  if (listener < 0 || bind(listener, generic, length) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, generic, &length) != 0) {
    if (listener >= 0) close(listener);
    return {-1, -1};
  }
  const int connector = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool connected = connector >= 0 && connect(connector, generic, length) == 0;
  const int acceptor = connected ? accept(listener, nullptr, nullptr) : -1;
  close(listener);
  if (acceptor < 0) {
    if (connector >= 0) close(connector);
    return {-1, -1};
  }
  return {connector, acceptor};
}

}  // namespace cclo::bench
