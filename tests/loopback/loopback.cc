#include "tests/loopback/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace cclo::testing {

int ListenLoopback(std::string* address) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in bound{};
  bound.sin_family = AF_INET;
  bound.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(bound);
  auto* generic = reinterpret_cast<sockaddr*>(&bound);
  if (fd < 0 || bind(fd, generic, length) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, generic, &length) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *address = "127.0.0.1:" + std::to_string(ntohs(bound.sin_port));
  return fd;
}

int ConnectLoopback(const std::string& address) {
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

namespace {

/// Calls `found` with the fields of each line of /proc/net/tcp and tcp6 whose socket is at
/// 127.0.0.1:`local` (mapped to IPv6 in tcp6, as a dual-stack socket like gRPC's is) with
/// remote 127.0.0.1:`remote`, or with none where `remote` is 0 (a listener). Lines read "sl
/// local rem st tx_queue:rx_queue ...", addresses in hex, host order.
void ForEachSocket(uint16_t local, uint16_t remote,
                   const std::function<void(const std::vector<std::string>&)>& found) {
  for (const auto& [path, loopback, any] :
       {std::tuple{"/proc/net/tcp", "0100007F", "00000000"},
        std::tuple{"/proc/net/tcp6", "0000000000000000FFFF00000100007F",
                   "00000000000000000000000000000000"}}) {
    const std::string local_address = absl::StrFormat("%s:%04X", loopback, local);
    const std::string remote_address =
        remote == 0 ? absl::StrCat(any, ":0000") : absl::StrFormat("%s:%04X", loopback, remote);
    std::ifstream table(path);
    for (std::string line; std::getline(table, line);) {
      std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
      if (fields.size() >= 5 && fields[1] == local_address && fields[2] == remote_address) {
        found(fields);
      }
    }
  }
}

}  // namespace

int64_t UnreadAt(uint16_t local, uint16_t remote) {
  int64_t unread = -1;
  ForEachSocket(local, remote, [&unread](const std::vector<std::string>& fields) {
    const std::vector<std::string> queues = absl::StrSplit(fields[4], ':');
    uint32_t queued = 0;
    if (unread < 0 && queues.size() == 2 && absl::SimpleHexAtoi(queues[1], &queued)) {
      unread = queued;
    }
  });
  return unread;
}

int ListeningAt(uint16_t port) {
  int listening = 0;
  ForEachSocket(port, 0, [&listening](const std::vector<std::string>& fields) {
    listening += fields[3] == "0A";  // TCP_LISTEN
  });
  return listening;
}

}  // namespace cclo::testing
